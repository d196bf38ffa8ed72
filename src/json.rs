//! JSON read by serde_json. A document is read once, at serde_json's own
//! speed; only when that read fails is it read again through
//! serde_path_to_error, to say where the mistake is.

use serde::Deserialize;
use serde_path_to_error::Segment;

/// A document that could not be read as the type asked for: where
/// (outermost step first; empty for the whole document) and serde_json's
/// error, which gives the line and column.
pub(crate) struct Mistake {
    pub(crate) path: Vec<Segment>,
    pub(crate) error: serde_json::Error,
}

/// Reads `bytes` as `T`, naming the place of a mistake.
pub(crate) fn read<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, Mistake> {
    let plain = match serde_json::from_slice(bytes) {
        Ok(value) => return Ok(value),
        Err(e) => e,
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Err(e) => Err(Mistake {
            path: e.path().iter().cloned().collect(),
            error: e.into_inner(),
        }),
        // Text after the value is a mistake of the whole document.
        Ok(_) => Err(Mistake {
            path: Vec::new(),
            error: plain,
        }),
    }
}

/// `choices[0].message`; empty for the whole document. Steps
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
    out
}
