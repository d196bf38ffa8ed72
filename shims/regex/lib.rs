//! `regex`, served by `regex-lite`: the same string API (`Regex::new`, `is_match`, `captures`,
//! `as_str`, `Error`), without the Unicode tables and the DFA engines that take the wasm past its
//! size limit. Unicode classes (`\p{L}`) are rejected at compile time with regex-lite's error;
//! `\d`, `\w` and `\s` are ASCII.
#![forbid(unsafe_code)]

pub use regex_lite::*;
