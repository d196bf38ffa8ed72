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
//!
//! A key echoed in pieces each shorter than [`WINDOW`] (split by spaces,
//! line breaks, quotes and commas of JSON string fragments, `+`, any
//! character keys are not made of) is found too: the text is also read with
//! those separators taken out, and a run of it that holds [`WINDOW`]
//! consecutive characters of the key is replaced, from the first piece's
//! word to the last's, separators included. And a key written with JSON's
//! `\u` escapes in a body that is not JSON (so no parser decoded them) is
//! found by reading the text once more with the escapes decoded; a text
//! that shows a key that way is returned decoded, the key replaced.

use std::borrow::Cow;
use std::collections::HashSet;

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
    let once = redact_once(text, secret);
    if !once.contains("\\u") {
        return once;
    }
    let decoded = decode_escapes(&once);
    match redact_once(&decoded, secret) {
        Cow::Owned(o) => Cow::Owned(o),
        Cow::Borrowed(_) => once,
    }
}

/// The split key, then the words.
fn redact_once<'a>(text: &'a str, secret: Option<&str>) -> Cow<'a, str> {
    match secret.and_then(|s| redact_split(text, s)) {
        Some(joined) => Cow::Owned(redact_words(&joined, secret).into_owned()),
        None => redact_words(text, secret),
    }
}

/// `text` with the runs that spell [`WINDOW`] or more consecutive
/// characters of `secret` once separators are taken out replaced by
/// `***`, whole words at either end; `None` when there is none. Keys
/// shorter than [`WINDOW`] are left to the word rule: joined across
/// separators, so short a piece would match ordinary text.
fn redact_split(text: &str, secret: &str) -> Option<String> {
    if secret.len() < WINDOW || !secret.is_ascii() {
        return None;
    }
    // The key characters of `text`, each with its byte offset.
    let kept: Vec<(usize, u8)> = text
        .char_indices()
        .filter(|(_, c)| c.is_ascii() && is_key_char(*c))
        .map(|(i, c)| (i, c as u8))
        .collect();
    let bytes: Vec<u8> = kept.iter().map(|(_, b)| *b).collect();
    let windows: HashSet<&[u8]> = secret.as_bytes().windows(WINDOW).collect();
    let mut hit = vec![false; bytes.len()];
    for (at, w) in bytes.windows(WINDOW).enumerate() {
        if windows.contains(w) {
            hit[at..at + WINDOW].iter_mut().for_each(|h| *h = true);
        }
    }
    if !hit.contains(&true) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut k = 0;
    while k < hit.len() {
        if !hit[k] {
            k += 1;
            continue;
        }
        let first = k;
        while k < hit.len() && hit[k] {
            k += 1;
        }
        let (start, _) = kept[first];
        let (last, _) = kept[k - 1];
        // Out to the words' ends, so no piece is left half shown.
        let start = text[..start]
            .rfind(|c: char| !is_key_char(c))
            .map_or(0, |i| {
                i + text[i..].chars().next().map_or(1, char::len_utf8)
            });
        let end = text[last..]
            .find(|c: char| !is_key_char(c))
            .map_or(text.len(), |i| last + i);
        let start = start.max(copied);
        if end <= copied {
            continue;
        }
        out.push_str(&text[copied..start]);
        out.push_str("***");
        copied = end;
    }
    out.push_str(&text[copied..]);
    Some(out)
}

/// `text` with JSON's `\uXXXX` escapes of ASCII characters decoded (other
/// escapes, and malformed ones, stay as written).
fn decode_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("\\u") {
        out.push_str(&rest[..at]);
        let escaped = rest
            .get(at + 2..at + 6)
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .filter(u8::is_ascii);
        match escaped {
            Some(b) => {
                out.push(char::from(b));
                rest = &rest[at + 6..];
            }
            None => {
                out.push_str("\\u");
                rest = &rest[at + 2..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The words rule (module docs).
fn redact_words<'a>(text: &'a str, secret: Option<&str>) -> Cow<'a, str> {
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
    fn a_key_in_short_pieces_is_redacted() {
        let r = |t: &str| redact(t, Some(KEY)).into_owned();
        // Echoed with separators, in pieces of four.
        assert_eq!(
            r("got sk-p roj- AbCd EfGh 0123 4567 89wx yz, try again"),
            "got ***, try again"
        );
        // Across JSON string fragments and line breaks.
        assert_eq!(
            r(r#"key ["sk-pro","j-AbCd","EfGh01","23456","789wxyz"] refused"#),
            "key [\"***\"] refused"
        );
        assert_eq!(r("sk-proj-\nAbCdEfG\nh0123+456789\nwxyz"), "***");
        // Ordinary words either side of it stay; a short lone piece does.
        assert_eq!(r("AbCd 0123 ok"), "AbCd 0123 ok");
    }

    #[test]
    fn a_key_in_unicode_escapes_is_redacted() {
        let escaped: String = KEY
            .chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        let r = redact(&format!("<html>bad key {escaped}</html>"), Some(KEY)).into_owned();
        assert_eq!(r, "<html>bad key ***</html>");
        // Escapes that hide no key stay as written.
        let t = "caf\\u00e9 \\u0041\\u0042 \\uZZZZ";
        assert!(matches!(redact(t, Some(KEY)), Cow::Borrowed(_)));
        // Escaped in a key's shape, without knowing the key.
        let shaped: String = "sk-ant-api03-abcdefgh"
            .chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        assert_eq!(redact(&format!("key {shaped}"), None), "key ***");
    }

    proptest::proptest! {
        #[test]
        fn a_key_cut_anywhere_by_separators_never_shows(
            cuts in proptest::collection::vec(1usize..8, 1..12),
            sep in proptest::sample::select(vec![" ", "\n", "\",\"", "+", " | ", "\t"]),
            before in "[a-z ]{0,20}",
            after in "[a-z ]{0,20}",
        ) {
            let mut text = before.clone();
            let mut rest = KEY;
            for n in cuts.iter().cycle() {
                if rest.is_empty() { break; }
                let (piece, tail) = rest.split_at((*n).min(rest.len()));
                text.push_str(piece);
                text.push_str(sep);
                rest = tail;
            }
            text.push_str(&after);
            let out = redact(&text, Some(KEY));
            let joined: String = out.chars().filter(|c| is_key_char(*c)).collect();
            for w in KEY.as_bytes().windows(WINDOW) {
                let w = std::str::from_utf8(w).unwrap();
                proptest::prop_assert!(!joined.contains(w), "{text:?} -> {out:?}");
            }
        }

        #[test]
        fn any_text_is_redacted_without_panic(text in "\\PC{0,200}") {
            let _ = redact(&text, Some(KEY));
            let _ = redact(&text, None);
        }
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
