//! The page's files, compiled into `nmemd` (`include_str!`): plain HTML, CSS and JavaScript,
//! no build step, no CDN, so a fresh clone builds with cargo alone and the page works offline.

use crate::server::ApiError;
use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use nmem_proto::wire::code;

const INDEX: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/style.css");

pub fn index() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response()
}

pub async fn serve(Path(file): Path<String>) -> Response {
    let (body, ctype) = match file.as_str() {
        "app.js" => (APP_JS, "text/javascript; charset=utf-8"),
        "style.css" => (STYLE, "text/css; charset=utf-8"),
        _ => {
            return ApiError::new(StatusCode::NOT_FOUND, code::NOT_FOUND, "no such asset")
                .into_response()
        }
    };
    ([(header::CONTENT_TYPE, ctype)], body).into_response()
}
