//! The edge proxy's request handling, host-neutral.
//!
//! The Worker module only moves bytes between workerd and this module:
//! routing, gateway auth, the body limit, reading either client format,
//! rendering answers and errors in the format the client spoke, response
//! headers and the JSON log line all live here, where `cargo test` reaches
//! them on the fake platform.
//!
//! Errors always come in the client's format: OpenAI
//! `{"error":{"message","type","param","code"}}`, Anthropic
//! `{"type":"error","error":{"type","message"}}`. No input can panic.

mod admit;
mod auth;
mod body;
pub(crate) mod buffered;
mod cache;
mod cache_status;
mod call;
mod chat;
mod client_status;
mod content;
mod dispatch;
mod endpoints;
#[cfg(feature = "otlp")]
mod export;
mod health;
mod http;
mod keepalive;
mod labels;
pub mod limits;
mod log;
mod login;
mod metrics;
mod models;
mod pass;
mod pass_responses;
mod point;
mod proxy;
mod render;
mod request;
mod responses;
mod route;
mod session;
mod setup;
mod sse;
mod status;
mod tenants;
mod traced;

pub use auth::Auth;

pub use http::{Inbound, Outbound, Piece, PieceStream, REQUEST_HEADERS};
pub use point::DataPoint;
pub use proxy::Gateway;
pub use request::{url_path, FORWARDED_HEADERS};
pub use setup::{config_error, Setup};
