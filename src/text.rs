//! Substring search for the crate's short strings (messages, paths,
//! headers): a plain byte scan, in place of the standard library's two-way
//! searcher, which is many times its size. UTF-8 is self-synchronizing, so
//! a byte match of a string is a match at character boundaries, as the
//! standard library finds it.

/// Where `needle` first occurs in `hay`.
pub(crate) fn find(hay: &str, needle: &str) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    hay.as_bytes()
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
}

/// Where `needle` last occurs in `hay`.
#[cfg_attr(not(all(target_arch = "wasm32", feature = "js")), allow(dead_code))]
pub(crate) fn rfind(hay: &str, needle: &str) -> Option<usize> {
    if needle.is_empty() {
        return Some(hay.len());
    }
    hay.as_bytes()
        .windows(needle.len())
        .rposition(|w| w == needle.as_bytes())
}

/// Whether `needle` occurs in `hay`.
pub(crate) fn contains(hay: &str, needle: &str) -> bool {
    find(hay, needle).is_some()
}

/// `hay` with every occurrence of a non-empty `needle` replaced by `with`,
/// left to right, as `str::replace` does.
#[cfg_attr(not(all(target_arch = "wasm32", feature = "js")), allow(dead_code))]
pub(crate) fn replace(hay: &str, needle: &str, with: &str) -> String {
    let mut out = String::with_capacity(hay.len());
    let mut rest = hay;
    while let Some(i) = find(rest, needle).filter(|_| !needle.is_empty()) {
        out.push_str(rest.get(..i).unwrap_or_default());
        out.push_str(with);
        rest = rest.get(i + needle.len()..).unwrap_or_default();
    }
    out.push_str(rest);
    out
}

/// `parts` joined by `sep`, as `[String]::join` joins them.
pub(crate) fn join(parts: &[String], sep: &str) -> String {
    let mut out = String::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push_str(sep);
        }
        out.push_str(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn searches_as_the_standard_library_searches() {
        let hays = [
            "",
            "a",
            "abc",
            "aaa",
            "é—é✓é",
            "bad key sk-1 and sk-1",
            " at line 1 column 2 at line 3",
        ];
        let needles = ["a", "aa", "b", "c", "é", "✓é", "sk-1", " at line ", "zz"];
        for h in hays {
            for n in needles {
                assert_eq!(find(h, n), h.find(n), "{h} {n}");
                assert_eq!(rfind(h, n), h.rfind(n), "{h} {n}");
                assert_eq!(contains(h, n), h.contains(n), "{h} {n}");
                assert_eq!(replace(h, n, "***"), h.replace(n, "***"), "{h} {n}");
            }
            assert_eq!(find(h, ""), h.find(""));
            let parts: Vec<String> = h.split('a').map(str::to_string).collect();
            assert_eq!(join(&parts, "; "), parts.join("; "));
            assert_eq!(rfind(h, ""), h.rfind(""));
        }
    }
}
