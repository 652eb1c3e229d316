//! Bounds on the fields of query requests, checked before any SQL runs: past one, the client
//! gets a 400 that says what to send instead. Without them a list of 32,766 types reached
//! SQLite as one statement (and its error, SQL text included, reached the client), and a 1 MB
//! `cwd` had every one of its ancestors looked up.

use super::QueryError;

/// A path (`cwd`, a file): Linux's PATH_MAX.
pub const MAX_PATH: usize = 4096;
/// A name (project, type, format).
pub const MAX_NAME: usize = 256;
/// Types in one request: the vocabulary has a few dozen.
pub const MAX_TYPES: usize = 64;
/// Files in one request.
pub const MAX_FILES: usize = 100;
/// A saved memory's text.
pub const MAX_MEMORY: usize = 64 * 1024;
/// A saved memory's title.
pub const MAX_TITLE: usize = 512;

/// `value` (the field `field`) is at most `max` bytes.
pub fn check_len(field: &str, value: &str, max: usize) -> Result<(), QueryError> {
    if value.len() <= max {
        return Ok(());
    }
    Err(QueryError::BadRequest(format!(
        "`{field}` is {} bytes; at most {max} are accepted: send a shorter one",
        value.len()
    )))
}

/// The project and cwd a request is scoped by.
pub fn check_scope(
    project: &Option<Option<String>>,
    cwd: &Option<String>,
) -> Result<(), QueryError> {
    if let Some(Some(p)) = project {
        check_len("project", p, MAX_NAME)?;
    }
    if let Some(c) = cwd {
        check_len("cwd", c, MAX_PATH)?;
    }
    Ok(())
}

/// A list field: at most `max_items` items of at most `max_each` bytes.
pub fn check_list(
    field: &str,
    items: &[String],
    max_items: usize,
    max_each: usize,
) -> Result<(), QueryError> {
    if items.len() > max_items {
        return Err(QueryError::BadRequest(format!(
            "`{field}` has {} items; at most {max_items} are accepted: narrow the list",
            items.len()
        )));
    }
    for item in items {
        check_len(field, item, max_each)?;
    }
    Ok(())
}

/// `format`, when given.
pub fn check_format(format: &Option<String>) -> Result<(), QueryError> {
    match format {
        Some(f) => check_len("format", f, MAX_NAME),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_a_bound_is_a_clear_error() {
        let many = vec!["command".to_string(); MAX_TYPES + 1];
        let e = check_list("obs_type", &many, MAX_TYPES, MAX_NAME).unwrap_err();
        assert!(e.to_string().contains("at most 64"), "{e}");
        assert!(check_list("obs_type", &many[..MAX_TYPES], MAX_TYPES, MAX_NAME).is_ok());
        let long = "/a".repeat(MAX_PATH);
        assert!(check_scope(&None, &Some(long)).is_err());
        assert!(check_scope(&Some(Some("p".repeat(MAX_NAME + 1))), &None).is_err());
        assert!(check_scope(&Some(None), &Some("/home/dev/app".into())).is_ok());
    }
}
