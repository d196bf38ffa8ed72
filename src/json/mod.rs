//! The npm package's hand readers ([`js`]); its writers are derived
//! `Serialize` types in `src/js/shapes.rs`.

#[cfg(any(test, all(target_arch = "wasm32", feature = "js")))]
pub(crate) mod js;
