//! A configuration problem and where it is: [`ConfigIssue`], and
//! [`ConfigError`], which holds every one found; and JSON read by serde with
//! the path of a mistake. Here, apart from [`crate::config`], so that
//! provider configurations and the npm package's readers report issues
//! without importing the module that builds on them.

use std::fmt;

use serde::Deserialize;
use serde_path_to_error::Segment;

/// One problem found in a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Where: `providers.openai.baseUrl`, `routes.default[1].provider`, ….
    pub path: String,
    /// What is wrong, for humans. Never holds a secret's value.
    pub message: String,
}

impl ConfigIssue {
    /// An issue at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigIssue {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Every problem in a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The problems, in the order found.
    pub issues: Vec<ConfigIssue>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid configuration: ")?;
        for (i, issue) in self.issues.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{issue}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// `routes.default[0].timeoutMs`; `(root)` for the whole document. Steps
/// serde_path_to_error could not name (where a syntax error struck between
/// two keys) are left out.
pub(crate) fn path_text(path: &[Segment]) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Unknown => {}
        }
    }
    if out.is_empty() {
        out.push_str("(root)");
    }
    out
}

/// Parses JSON into `T`, naming the path of the first mismatch
/// (`routes.default[0].timeoutMs: invalid type: string "5", expected u64 at
/// line 1 column 52`).
pub fn parse_json<'de, T: Deserialize<'de>>(json: &'de str) -> Result<T, ConfigError> {
    from_json(json).map_err(|(path, e)| ConfigError {
        issues: vec![ConfigIssue::new(path_text(&path), e.to_string())],
    })
}

/// Reads `T` from JSON text; on failure, where (outermost step first) and
/// serde_json's error, which gives the line and column. The path is only
/// tracked when the plain read fails: a valid document is read once, at
/// serde_json's own speed.
pub(crate) fn from_json<'de, T: Deserialize<'de>>(
    json: &'de str,
) -> Result<T, (Vec<Segment>, serde_json::Error)> {
    let plain = match serde_json::from_str(json) {
        Ok(value) => return Ok(value),
        Err(e) => e,
    };
    let mut de = serde_json::Deserializer::from_str(json);
    match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Err(e) => {
            let path = e.path().iter().cloned().collect();
            Err((path, e.into_inner()))
        }
        // Text after the value is a mistake of the whole document.
        Ok(_) => Err((Vec::new(), plain)),
    }
}
