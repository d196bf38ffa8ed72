//! A configuration problem and where it is: [`ConfigIssue`], and
//! [`ConfigError`], which holds every one found; and [`parse_json`], which
//! reports a document's mistake as one. Here, apart from [`crate::config`], so that
//! provider configurations and the npm package's readers report issues
//! without importing the module that builds on them.

use std::fmt;

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

/// `routes.default[0].timeoutMs`; `(root)` for the whole document.
pub(crate) fn path_text(path: &[Segment]) -> String {
    let text = crate::json::path_text(path);
    if text.is_empty() {
        "(root)".into()
    } else {
        text
    }
}
