//! The [`Platform`] inside workerd, over the `worker` crate: `Date.now`,
//! `Math.random`, `setTimeout` (cleared when dropped) and `fetch` with an
//! `AbortController` aborted when the future or the body is dropped.
//!
//! A stop-gap until the web platform (`src/web/`, feature `web`) lands: it
//! does the same over the JS globals and will replace this file.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use worker::{AbortController, ByteStream, Delay, Fetch, Method, Request, RequestInit};

use crate::platform::{
    Body, Headers, HttpRequest, HttpResponse, Platform, TransportError, UnixMillis,
};

/// The platform of a Worker isolate. Holds no state.
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkerPlatform;

impl Platform for WorkerPlatform {
    fn now(&self) -> UnixMillis {
        worker::js_sys::Date::now() as UnixMillis
    }

    fn random(&self) -> f64 {
        worker::js_sys::Math::random()
    }

    fn sleep(&self, dur: Duration) -> impl Future<Output = ()> {
        Delay::from(dur)
    }

    fn fetch(
        &self,
        req: HttpRequest,
    ) -> impl Future<Output = Result<HttpResponse, TransportError>> {
        fetch(req)
    }
}

/// Aborts its controller when dropped.
struct AbortOnDrop(Option<AbortController>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            c.abort();
        }
    }
}

fn transport(e: worker::Error) -> TransportError {
    TransportError::from_message(e.to_string())
}

async fn fetch(req: HttpRequest) -> Result<HttpResponse, TransportError> {
    let controller = AbortController::default();
    let signal = controller.signal();
    let guard = AbortOnDrop(Some(controller));
    let headers = worker::Headers::new();
    for (name, value) in req.headers.iter() {
        headers.append(name, value).map_err(transport)?;
    }
    let mut init = RequestInit::new();
    init.with_method(Method::from(req.method.clone()))
        .with_headers(headers);
    if !req.body.is_empty() {
        let body = worker::js_sys::Uint8Array::from(req.body.as_slice());
        init.with_body(Some(body.into()));
    }
    let request = Request::new_with_init(&req.url, &init).map_err(transport)?;
    let mut resp = Fetch::Request(request)
        .send_with_signal(&signal)
        .await
        .map_err(transport)?;
    let headers: Headers = resp.headers().entries().collect();
    let status = resp.status_code();
    let body = match resp.stream() {
        Ok(stream) => Body::stream(Guarded {
            inner: stream,
            _guard: guard,
        }),
        Err(_) => Body::full(Vec::new()),
    };
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

/// The response body, aborting the request when dropped before its end.
struct Guarded {
    inner: ByteStream,
    _guard: AbortOnDrop,
}

impl Stream for Guarded {
    type Item = Result<Vec<u8>, TransportError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.inner)
            .poll_next(cx)
            .map(|c| c.map(|r| r.map_err(transport)))
    }
}
