//! The HTTP client of the authorization flow: its own reqwest client that
//! never follows a redirect (a metadata document or token endpoint that
//! redirects elsewhere is refused, not followed: RFC 9700 §4.11's SSRF
//! advice), every body read within a size limit and a deadline, and the
//! adapter the `oauth2` crate sends its token requests through.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use oauth2::{AsyncHttpClient, HttpClientError, HttpRequest, HttpResponse};
use reqwest::header::{HeaderValue, ACCEPT, CONTENT_TYPE, LOCATION};

use crate::error::{excerpt, AuthError};

/// The most bytes read of any answer of the flow (metadata, registration,
/// tokens): real ones are a few kilobytes.
pub const MAX_BODY: usize = 1 << 20;

#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    timeout: Duration,
}

/// An answer read whole: status, `Location`, body.
pub struct Answer {
    pub status: u16,
    pub location: Option<String>,
    pub body: Vec<u8>,
}

impl Http {
    /// One reqwest client per connect timeout for the whole process: every
    /// HTTP server of a configuration gets an Authorizer (and a watcher a
    /// new one per observation), and building a client reads the system's
    /// certificates; the pool is shared, as plumbline-mcp's is.
    pub fn new(connect_timeout: Duration, timeout: Duration) -> Result<Http, AuthError> {
        static CLIENTS: Mutex<Vec<(Duration, reqwest::Client)>> = Mutex::new(Vec::new());
        let mut clients = CLIENTS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, client)) = clients.iter().find(|(t, _)| *t == connect_timeout) {
            return Ok(Http {
                client: client.clone(),
                timeout,
            });
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| AuthError::Http(describe(e)))?;
        clients.push((connect_timeout, client.clone()));
        Ok(Http { client, timeout })
    }

    /// GETs `url` (JSON accepted).
    pub async fn get(&self, url: &str) -> Result<Answer, AuthError> {
        let request = self
            .client
            .get(url)
            .header(ACCEPT, HeaderValue::from_static("application/json"));
        self.send(request, url).await
    }

    /// POSTs `body` as JSON to `url`.
    pub async fn post_json(
        &self,
        url: &str,
        body: &serde_json::Value,
    ) -> Result<Answer, AuthError> {
        let request = self
            .client
            .post(url)
            .header(ACCEPT, HeaderValue::from_static("application/json"))
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(body.to_string());
        self.send(request, url).await
    }

    async fn send(&self, request: reqwest::RequestBuilder, url: &str) -> Result<Answer, AuthError> {
        let work = async {
            let response = request
                .send()
                .await
                .map_err(|e| AuthError::Http(format!("{}: {}", shown_url(url), chain(e))))?;
            let status = response.status().as_u16();
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let body = read_body(response, url).await?;
            Ok(Answer {
                status,
                location,
                body,
            })
        };
        tokio::time::timeout(self.timeout, work)
            .await
            .map_err(|_| {
                AuthError::Http(format!(
                    "{}: no answer within {:?}",
                    shown_url(url),
                    self.timeout
                ))
            })?
    }
}

async fn read_body(mut response: reqwest::Response, url: &str) -> Result<Vec<u8>, AuthError> {
    let mut out = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| AuthError::Http(format!("{}: {}", shown_url(url), chain(e))))?
    {
        if out.len() + chunk.len() > MAX_BODY {
            return Err(AuthError::Http(format!(
                "{}: the answer is larger than {MAX_BODY} bytes",
                shown_url(url)
            )));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// A URL fit for a message: no query (a code or state may be in it), no
/// user information, sanitised.
pub fn shown_url(url: &str) -> String {
    let cut = url.split(['?', '#']).next().unwrap_or(url);
    excerpt(plumbline_base::redact::redact_url(cut).as_bytes(), 200)
}

/// A reqwest error with its causes, its URL first and shown without a
/// query (a code or state may be in it).
pub(crate) fn describe(e: reqwest::Error) -> String {
    match e.url().map(|u| shown_url(u.as_str())) {
        Some(url) => format!("{url}: {}", chain(e)),
        None => chain(e),
    }
}

/// A reqwest error's causes ([`plumbline_base::error_chain`]) without its
/// URL, which the message names already.
fn chain(e: reqwest::Error) -> String {
    plumbline_base::error_chain(&e.without_url())
}

/// `oauth2`'s token requests go through [`Http`]: its client (no
/// redirects), its deadline and its size limit.
impl<'c> AsyncHttpClient<'c> for Http {
    type Error = HttpClientError<reqwest::Error>;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, Self::Error>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(async move {
            let request: reqwest::Request = request.try_into().map_err(Box::new)?;
            let url = request.url().to_string();
            let work = async {
                let response = self.client.execute(request).await.map_err(Box::new)?;
                let mut builder = oauth2::http::Response::builder().status(response.status());
                for (k, v) in response.headers() {
                    builder = builder.header(k, v);
                }
                let body = read_body(response, &url)
                    .await
                    .map_err(|e| HttpClientError::Other(e.to_string()))?;
                builder.body(body).map_err(HttpClientError::Http)
            };
            tokio::time::timeout(self.timeout, work)
                .await
                .map_err(|_| {
                    HttpClientError::Other(format!(
                        "{}: no answer within {:?}",
                        shown_url(&url),
                        self.timeout
                    ))
                })?
        })
    }
}
