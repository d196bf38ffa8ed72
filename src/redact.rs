//! Keys out of text: what a provider's error says is shown to the client
//! and logged, and providers quote keys back (`Incorrect API key provided:
//! sk-proj-****abcd`, a proxy echoing the `Authorization` header).
//!
//! The text is read as words: runs of the characters keys and their masks
//! are made of (ASCII letters and digits, `-`, `_`, `.`, `*`, `…`). A word
//! is replaced by `***` when it
//! - holds any [`WINDOW`] consecutive characters of the provider's key
//!   (the key itself, or a piece of it cut by truncation; all of a key
//!   shorter than that),
//! - is a masked form of the key: a mask (`***`, `...`, `…`) and the key's
//!   last four characters,
//! - or looks like any key: a known key prefix (`sk-`, `sk_`, `gsk_`,
//!   `xai-`, `AIza`) and at least [`MIN_KEY`] characters in all.

use std::borrow::Cow;

/// The shortest piece of the key taken for the key.
pub(crate) const WINDOW: usize = 8;

/// The shortest word with a key prefix taken for a key.
pub(crate) const MIN_KEY: usize = 12;

const PREFIXES: &[&str] = &["sk-", "sk_", "gsk_", "xai-", "AIza"];

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '*' | '…')
}

/// `text` with every word that is, or shows part of, `secret` or any key
/// replaced by `***`; borrowed when there is none.
pub(crate) fn redact<'a>(text: &'a str, secret: Option<&str>) -> Cow<'a, str> {
    let secret = secret.map(str::trim).filter(|s| s.len() >= 4);
    let mut out: Option<String> = None;
    let mut copied = 0; // bytes of `text` already in `out`
    let mut start = None;
    for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
        match (is_key_char(c) && i < text.len(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                start = None;
                if is_key(&text[s..i], secret) {
                    let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
                    o.push_str(&text[copied..s]);
                    o.push_str("***");
                    copied = i;
                }
            }
            _ => {}
        }
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut o) => {
            o.push_str(&text[copied..]);
            Cow::Owned(o)
        }
    }
}

fn is_key(word: &str, secret: Option<&str>) -> bool {
    if let Some(s) = secret {
        let b = s.as_bytes();
        if b.windows(WINDOW.min(b.len()))
            .any(|w| std::str::from_utf8(w).is_ok_and(|w| word.contains(w)))
        {
            return true;
        }
        let masked = word.contains("***") || word.contains("...") || word.contains('…');
        let tail = s.get(s.len().saturating_sub(4)..);
        if masked
            && tail.is_some_and(|t| word.ends_with(t) || word.trim_end_matches('.').ends_with(t))
        {
            return true;
        }
    }
    let word = word.trim_start_matches(['.', '*', '…']);
    word.len() >= MIN_KEY && PREFIXES.iter().any(|p| word.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-proj-AbCdEfGh0123456789wxyz";

    #[test]
    fn the_key_and_pieces_of_it_are_redacted() {
        let r = |t: &str| redact(t, Some(KEY)).into_owned();
        assert_eq!(r(&format!("bad key {KEY}.")), "bad key ***");
        assert_eq!(
            r(&format!("Authorization: Bearer {KEY}")),
            "Authorization: Bearer ***"
        );
        // A piece: the key cut by truncation, or its middle.
        assert_eq!(r("key sk-proj-AbCdEf"), "key ***");
        assert_eq!(r("...Gh0123456789"), "***");
        assert_eq!(r(&format!("\"{KEY}\",\"x\"")), "\"***\",\"x\"");
    }

    #[test]
    fn masked_forms_of_the_key_are_redacted() {
        let r = |t: &str| redact(t, Some(KEY)).into_owned();
        assert_eq!(
            r("Incorrect API key provided: sk-proj-********************wxyz. You can find"),
            "Incorrect API key provided: *** You can find"
        );
        assert_eq!(r("key sk-...wxyz is invalid"), "key *** is invalid");
        assert_eq!(r("key sk-ant-…wxyz"), "key ***");
    }

    #[test]
    fn anything_shaped_like_a_key_is_redacted_without_knowing_it() {
        let r = |t: &str| redact(t, None).into_owned();
        assert_eq!(r("bad key sk-ant-api03-abcdefgh"), "bad key ***");
        assert_eq!(r("x gsk_abcdefghijkl y"), "x *** y");
        assert_eq!(r("key=AIzaSyA1234567890"), "key=***");
    }

    #[test]
    fn other_text_is_left_alone() {
        for t in [
            "rate limited: try again in 2.5s (see https://example.com/docs)",
            "model gpt-4.1-mini not found",
            "wxyz appears here, masked *** and ... too",
            "sk-short",
            "",
        ] {
            assert!(matches!(redact(t, Some(KEY)), Cow::Borrowed(_)), "{t}");
        }
        assert_eq!(
            redact("ünïcödé sk-proj-AbCdEfGh é", Some(KEY)),
            "ünïcödé *** é"
        );
    }
}
