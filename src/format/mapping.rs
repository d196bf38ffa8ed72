//! What maps to what between the two dialects, where the mapping is a
//! table rather than a rename: reasoning effort and thinking budgets,
//! service tiers, image data URLs, and what an encoder does with the
//! pieces of a request the neutral form does not hold.

use serde_json::{Map, Value};

use crate::chat::{ChatRequest, Dialect, Gap, ImageSource};

use super::{Fields, FormatError};

/// Where a reader records a piece of the request it cannot translate.
pub(crate) type GapFn<'g> = dyn FnMut(String, Gap) + 'g;

/// Records each top-level field of `f` its reader does not `read`: a
/// sampling or labelling hint (left out elsewhere), one that has
/// `no_equivalent` (refused elsewhere), or one this crate does not know.
pub(crate) fn unread_fields(
    f: &Fields<'_>,
    read: &[&str],
    hints: &[&str],
    no_equivalent: &[&str],
    gap: &mut GapFn<'_>,
) {
    for key in f.keys() {
        if f.get(key).is_none() || read.contains(&key) {
            continue;
        }
        let kind = if hints.contains(&key) {
            Gap::Hint
        } else if no_equivalent.contains(&key) {
            Gap::NoEquivalent
        } else {
            Gap::Unknown
        };
        gap(key.to_string(), kind);
    }
}

/// The thinking budget for an OpenAI `reasoning_effort`, `None` for a
/// level without one (`none` is no thinking at all, handled apart).
///
/// | effort  | budget_tokens |
/// |---------|---------------|
/// | minimal | 1024 (Anthropic's least) |
/// | low     | 2048          |
/// | medium  | 8192          |
/// | high    | 16384         |
pub(crate) fn effort_budget(effort: &str) -> Option<u32> {
    match effort {
        "minimal" => Some(1024),
        "low" => Some(2048),
        "medium" => Some(8192),
        "high" => Some(16384),
        _ => None,
    }
}

/// The least thinking budget Anthropic accepts.
pub(crate) const MIN_BUDGET: u32 = 1024;

/// The `reasoning_effort` for an Anthropic thinking budget: under 4096
/// `low`, under 16384 `medium`, else `high` (the three levels every OpenAI
/// reasoning model takes).
pub(crate) fn budget_effort(budget: u32) -> &'static str {
    match budget {
        0..=4095 => "low",
        4096..=16383 => "medium",
        _ => "high",
    }
}

/// An OpenAI `service_tier` for the tier a client named, `None` when
/// OpenAI has no such tier.
pub(crate) fn openai_tier(tier: &str) -> Option<&str> {
    match tier {
        "auto" | "default" | "flex" | "priority" | "scale" => Some(tier),
        "standard_only" => Some("default"),
        _ => None,
    }
}

/// An Anthropic `service_tier` for the tier a client named, `None` when
/// Anthropic has no such tier.
pub(crate) fn anthropic_tier(tier: &str) -> Option<&str> {
    match tier {
        "auto" | "standard_only" => Some(tier),
        "default" => Some("standard_only"),
        _ => None,
    }
}

/// An OpenAI `image_url.url`: a base64 `data:` URL becomes inline bytes,
/// anything else a URL to fetch. `None` for a `data:` URL that is not
/// base64 (neither dialect takes one).
pub(crate) fn image_source(url: &str) -> Option<ImageSource> {
    let Some(rest) = url.strip_prefix("data:") else {
        return Some(ImageSource::Url {
            url: url.to_string(),
        });
    };
    let (meta, data) = rest.split_once(',')?;
    let media_type = meta.strip_suffix(";base64")?;
    Some(ImageSource::Base64 {
        media_type: media_type.to_string(),
        data: data.to_string(),
    })
}

/// The OpenAI `image_url.url` of an image source.
pub(crate) fn image_url(source: &ImageSource) -> String {
    match source {
        ImageSource::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
        ImageSource::Url { url } => url.clone(),
    }
}

/// Checks what the neutral request does not hold against an encoder for
/// `target`. A top-level field the client wrote in `target`'s own dialect
/// goes into `extra`, to be sent as it came. Otherwise an unknown field or
/// one without equivalent is refused as [`FormatError::unsupported`] (the
/// chain's "this entry cannot serve it"), and a hint is named in
/// `omitted`.
pub(crate) fn check_untranslated(
    req: &ChatRequest,
    target: Dialect,
    omitted: &mut Vec<String>,
    extra: &mut Map<String, Value>,
) -> Result<(), FormatError> {
    let name = match target {
        Dialect::OpenAi => "openai",
        Dialect::Anthropic => "anthropic",
        Dialect::Responses => "responses",
    };
    for u in &req.untranslated {
        if let (true, Some(value)) = (u.dialect == target, &u.value) {
            extra.insert(u.path.clone(), value.clone());
            continue;
        }
        match u.gap {
            Gap::Unknown => {
                return Err(FormatError::unsupported(
                    &u.path,
                    format!("unknown field, cannot be translated for {name}"),
                ))
            }
            Gap::NoEquivalent => {
                return Err(FormatError::unsupported(
                    &u.path,
                    format!("not available from {name}"),
                ))
            }
            Gap::Hint => omitted.push(u.path.clone()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_urls_split_into_media_type_and_bytes() {
        let s = image_source("data:image/png;base64,AAAA").unwrap();
        assert_eq!(
            s,
            ImageSource::Base64 {
                media_type: "image/png".into(),
                data: "AAAA".into()
            }
        );
        assert_eq!(image_url(&s), "data:image/png;base64,AAAA");
        assert_eq!(image_source("data:text/plain,hi"), None);
        assert_eq!(
            image_source("https://x/y.png"),
            Some(ImageSource::Url {
                url: "https://x/y.png".into()
            })
        );
    }

    #[test]
    fn effort_and_budget_map_both_ways() {
        for effort in ["low", "medium", "high"] {
            let budget = effort_budget(effort).unwrap();
            assert_eq!(budget_effort(budget), effort);
        }
        assert_eq!(effort_budget("minimal"), Some(MIN_BUDGET));
        assert_eq!(effort_budget("xhigh"), None);
    }
}
