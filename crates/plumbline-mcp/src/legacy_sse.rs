//! The legacy HTTP+SSE transport (protocol 2024-11-05): a GET stream whose
//! first event names the endpoint to POST requests to; every answer comes
//! back as a `message` event on that stream.

use reqwest::header::{HeaderMap, ACCEPT, CONTENT_TYPE, LOCATION};
use reqwest::{Client, Response, Url};
use serde_json::{json, Value};
use tokio::time::{timeout_at, Instant};

use crate::error::{excerpt, ListError, ListErrorKind};
use crate::http::{
    client, extra_headers, redacted_url, refusal, same_origin, timeout_error, HttpSpec,
};
use crate::limits::Limits;
use crate::listing::{Era, Listing};
use crate::protocol::{self, parse_inbound, Announced, Inbound, Reply, Transport};
use crate::sse;

pub(crate) async fn list_tools(spec: &HttpSpec, limits: &Limits) -> Result<Listing, ListError> {
    let mut t = SseTransport::connect(spec, limits, client(limits)?).await?;
    protocol::list(&mut t, limits).await
    // Dropping the transport closes the stream, which ends the session.
}

pub(crate) struct SseTransport {
    client: Client,
    headers: HeaderMap,
    endpoint: Url,
    stream: Response,
    parser: sse::Parser,
    queued: std::collections::VecDeque<sse::Event>,
    next_id: u64,
    announced: Announced,
}

fn io(e: reqwest::Error) -> ListError {
    ListErrorKind::Io(crate::error::describe_reqwest(&e)).into()
}

impl SseTransport {
    pub(crate) async fn connect(
        spec: &HttpSpec,
        limits: &Limits,
        client: Client,
    ) -> Result<Self, ListError> {
        let headers = extra_headers(spec)?;
        let base = Url::parse(&spec.url).map_err(|e| ListErrorKind::Protocol {
            method: "configuration",
            message: format!("invalid URL: {e}"),
        })?;
        let started = Instant::now();
        let deadline = started + limits.connect_timeout;
        let stream = timeout_at(
            deadline,
            client
                .get(base.clone())
                .headers(headers.clone())
                .header(ACCEPT, "text/event-stream")
                .send(),
        )
        .await
        .map_err(|_| timeout_error("connect", started, deadline))?
        .map_err(io)?;
        if !stream.status().is_success() {
            return Err(refusal(
                "connect",
                stream.url(),
                stream.status(),
                stream.headers().get(LOCATION),
                b"(the event stream)",
            ));
        }
        let mut t = SseTransport {
            client,
            headers,
            endpoint: base.clone(),
            stream,
            parser: sse::Parser::new(limits.max_message_bytes),
            queued: Default::default(),
            next_id: 0,
            announced: Announced::default(),
        };
        // The first event tells where to send requests.
        loop {
            let ev = t.next_event("connect", started, deadline).await?;
            if ev.event == "endpoint" {
                let target = String::from_utf8_lossy(&ev.data).trim().to_owned();
                t.endpoint = base.join(&target).map_err(|e| ListErrorKind::Protocol {
                    method: "connect",
                    message: format!("bad endpoint {}: {e}", excerpt(target.as_bytes(), 80)),
                })?;
                // Requests carry the configured headers: they go only where
                // the stream came from (as the official SDKs require).
                if !same_origin(&t.endpoint, t.stream.url()) {
                    return Err(ListErrorKind::Protocol {
                        method: "connect",
                        message: format!(
                            "the endpoint {} is not on the event stream's origin; \
                             not sending the configured headers there",
                            redacted_url(&t.endpoint)
                        ),
                    }
                    .into());
                }
                return Ok(t);
            }
        }
    }

    async fn next_event(
        &mut self,
        stage: &'static str,
        started: Instant,
        deadline: Instant,
    ) -> Result<sse::Event, ListError> {
        loop {
            if let Some(ev) = self.queued.pop_front() {
                return Ok(ev);
            }
            let chunk = timeout_at(deadline, self.stream.chunk())
                .await
                .map_err(|_| timeout_error(stage, started, deadline))?
                .map_err(io)?;
            let Some(chunk) = chunk else {
                return Err(ListErrorKind::Exited {
                    stage,
                    how: crate::error::Ended::Closed("event stream closed"),
                }
                .into());
            };
            let events = self
                .parser
                .push(&chunk)
                .map_err(|limit| ListError::from(ListErrorKind::MessageTooLarge { limit }))?;
            self.queued.extend(events);
        }
    }

    async fn post(&self, message: &Value, stage: &'static str) -> Result<(), ListError> {
        let resp = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(message.to_string())
            .send()
            .await
            .map_err(io)?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(refusal(
                stage,
                resp.url(),
                resp.status(),
                resp.headers().get(LOCATION),
                b"(a POST to the endpoint)",
            ))
        }
    }
}

impl protocol::Stream for SseTransport {
    async fn send(&mut self, message: &Value, stage: &'static str) -> Result<(), ListError> {
        self.post(message, stage).await
    }

    async fn receive(
        &mut self,
        stage: &'static str,
        started: Instant,
        deadline: Instant,
    ) -> Result<Option<Inbound>, ListError> {
        let ev = self.next_event(stage, started, deadline).await?;
        if ev.event != "message" || ev.data.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        parse_inbound(&ev.data, stage).map(Some)
    }

    fn announced(&mut self) -> &mut Announced {
        &mut self.announced
    }
}

impl Transport for SseTransport {
    async fn request(
        &mut self,
        method: &'static str,
        params: Value,
        deadline: Instant,
    ) -> Result<Reply, ListError> {
        self.next_id += 1;
        protocol::request_on(self, self.next_id, method, params, deadline).await
    }

    fn take_late_answer(&mut self, method: &'static str) -> Option<Reply> {
        self.announced.take_late(method)
    }

    async fn notify(&mut self, method: &'static str, params: Value) -> Result<(), ListError> {
        self.post(
            &json!({"jsonrpc": "2.0", "method": method, "params": params}),
            method,
        )
        .await
    }

    fn take_list_changed(&mut self) -> bool {
        std::mem::take(&mut self.announced.list_changed)
    }

    fn negotiated(&mut self, _era: Era, _version: &str) {}

    /// Notifications arrive on the stream that is already open.
    async fn ready_to_list(&mut self, _era: Era, _deadline: Instant) -> Result<(), ListError> {
        Ok(())
    }

    fn may_be_stateless(&self) -> bool {
        false
    }

    fn hears_notifications(&self) -> bool {
        true
    }

    async fn wait_list_changed(&mut self) -> Result<(), ListError> {
        protocol::wait_on(self).await
    }
}
