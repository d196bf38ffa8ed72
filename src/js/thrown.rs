//! What JS providers threw, kept so that the error a caller gets for that
//! failure has it as its `cause` (`Error.cause`): a [`ProviderError`] is
//! plain data and cannot hold a JS value.

use std::cell::RefCell;
use std::collections::VecDeque;

use wasm_bindgen::JsValue;

use crate::error::ProviderError;

/// How many thrown values are kept.
const KEPT: usize = 32;

thread_local! {
    /// The last [`KEPT`] thrown values, each with its provider and the
    /// error it was classified as: a bound, not a history.
    static THROWN: RefCell<VecDeque<(String, ProviderError, JsValue)>> =
        const { RefCell::new(VecDeque::new()) };
}

/// Keeps what `provider` threw to fail with `error`.
pub(crate) fn keep(provider: &str, error: &ProviderError, thrown: JsValue) {
    THROWN.with(|kept| {
        let mut kept = kept.borrow_mut();
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back((provider.to_string(), error.clone(), thrown));
    });
}

/// What `provider` threw to fail with `error`, when it is among the values
/// kept (the latest that matches).
pub(crate) fn thrown_by(provider: &str, error: &ProviderError) -> Option<JsValue> {
    THROWN.with(|kept| {
        kept.borrow()
            .iter()
            .rev()
            .find(|(p, e, _)| p == provider && e == error)
            .map(|(_, _, thrown)| thrown.clone())
    })
}
