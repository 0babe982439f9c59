//! The flow: what [`Authorizer`] does when a server refuses a request.

use std::time::{Duration, Instant};

use oauth2::basic::{BasicClient, BasicErrorResponse};
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointNotSet,
    EndpointSet, HttpClientError, PkceCodeChallenge, RedirectUrl, RefreshToken, RequestTokenError,
    Scope, TokenResponse, TokenUrl,
};
use reqwest::Url;
use serde_json::json;

use crate::challenge::{parse, Challenge};
use crate::error::{excerpt, AuthError};
use crate::http::{shown_url, Http};
use crate::metadata::{self, ResourceMetadata, ServerMetadata};

/// How the person who authorizes takes part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UserAgent {
    /// Nobody: an authorization that needs a person fails with
    /// [`AuthError::LoginRequired`].
    #[default]
    None,
    /// A person at this machine: the authorization URL is opened in a
    /// browser (`PLUMBLINE_BROWSER`, else `xdg-open` or `open`) and
    /// printed, and the redirect is received on a loopback port.
    Browser,
    /// For tests only: the authorization request is sent as a GET and the
    /// redirect the authorization server answers with at once (no login
    /// page) is read as the browser would have delivered it.
    FollowRedirect,
}

/// Which grant obtains tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Grant {
    /// Authorization code with PKCE (a person authorizes).
    #[default]
    AuthorizationCode,
    /// Client credentials (a machine; needs a pre-registered client).
    ClientCredentials,
}

/// What the configuration says about a server's authorization.
#[derive(Clone, Default)]
pub struct Settings {
    /// A pre-registered client (and its secret, for a confidential one).
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// A private key the client proves itself with instead of a secret
    /// (a JWT assertion: `private_key_jwt`).
    pub client_assertion_key: Option<std::sync::Arc<crate::jwt::AssertionKey>>,
    /// An HTTPS URL where this client's metadata document is hosted
    /// (Client ID Metadata Documents), used where the authorization server
    /// supports them.
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for instead of those discovered.
    pub scopes: Option<Vec<String>>,
    /// The authorization server the configured client belongs to: a
    /// configured secret (or assertion) goes to no other, whatever the
    /// server's resource metadata names.
    pub issuer: Option<String>,
    pub grant: Grant,
    pub user_agent: UserAgent,
    /// Where tokens are kept between runs, and the server's URL (the
    /// key there). Without a file, tokens live as long as the process.
    pub token_file: Option<crate::tokens::TokenFile>,
    pub server: String,
    /// What a person runs to log in (`plumbline login NAME`), for
    /// messages.
    pub login_hint: Option<String>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[redacted]"),
            )
            .field("client_assertion_key", &self.client_assertion_key)
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scopes", &self.scopes)
            .field("grant", &self.grant)
            .field("user_agent", &self.user_agent)
            .finish()
    }
}

/// The redirect URI when none is configured (RFC 8252 §7.3: a loopback
/// IP literal; its port may differ at each authorization).
const DEFAULT_REDIRECT: &str = "http://127.0.0.1/callback";

/// Authorizations in a row without a request accepted: past this, the
/// server is refusing every token, and asking again would loop.
const MAX_AUTHORIZATIONS: u32 = 3;

/// The longest an access token is taken to live.
const MAX_LIFETIME: Duration = Duration::from_secs(366 * 86_400);

/// Renew an access token this long before it expires.
const RENEW_BEFORE: Duration = Duration::from_secs(60);

/// Where the authorization server sends the person back: the URI, and
/// for a browser the loopback listener that receives it.
struct Redirect<'a> {
    uri: &'a str,
    listener: Option<tokio::net::TcpListener>,
}

/// How this client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Basic,
    Post,
    None,
    /// A JWT signed with the client's key (RFC 7523).
    PrivateKeyJwt,
}

#[derive(Clone)]
struct Registration {
    client_id: String,
    client_secret: Option<String>,
    method: Method,
}

struct Tokens {
    access: String,
    refresh: Option<String>,
    expires_at: Option<Instant>,
    scopes: Vec<String>,
}

#[derive(Default)]
struct State {
    /// The authorization server the registration and tokens are from.
    issuer: Option<String>,
    server: Option<ServerMetadata>,
    resource: Option<String>,
    registration: Option<Registration>,
    tokens: Option<Tokens>,
    /// Where the server's last challenge said its resource metadata is.
    resource_metadata_url: Option<String>,
    /// Authorizations since a request was last accepted.
    in_a_row: u32,
    /// Whether the token file was read.
    loaded: bool,
}

/// One server's authorization: its registration and tokens, kept between
/// requests (and between listings, for as long as it lives).
pub struct Authorizer {
    settings: Settings,
    http: Http,
    state: tokio::sync::Mutex<State>,
}

type CodeClient =
    BasicClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;
type TokenClient =
    BasicClient<EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

impl Authorizer {
    pub fn new(
        settings: Settings,
        connect_timeout: Duration,
        timeout: Duration,
    ) -> Result<Authorizer, AuthError> {
        if settings.grant == Grant::ClientCredentials && settings.client_id.is_none() {
            return Err(AuthError::Configuration(
                "the client-credentials grant needs a client_id".to_owned(),
            ));
        }
        Ok(Authorizer {
            settings,
            http: Http::new(connect_timeout, timeout)?,
            state: tokio::sync::Mutex::new(State::default()),
        })
    }

    /// The access token to send now, if there is one; renewed with the
    /// refresh token first when it expires within a minute.
    pub async fn bearer(&self) -> Option<String> {
        let mut st = self.state.lock().await;
        self.load(&mut st);
        let due = st.tokens.as_ref().is_some_and(|t| {
            t.expires_at
                .is_some_and(|at| at <= Instant::now() + RENEW_BEFORE)
        });
        if due {
            // Refused: send nothing and let the server's refusal start a
            // new authorization. Not renewed for now (an outage): the old
            // token is still tried; the server says whether it expired.
            if let Err(AuthError::LoginRequired(_)) = self.refresh(&mut st).await {
                st.tokens = None;
            }
        }
        st.tokens.as_ref().map(|t| t.access.clone())
    }

    /// [`Authorizer::bearer`] in a task of its own. A caller that stops
    /// waiting (its deadline passed, its client went away) would otherwise
    /// cut a refresh short after the authorization server had spent the
    /// old refresh token (rotation), and a person would have to log in
    /// again; here the exchange completes and its tokens are kept for the
    /// next request.
    pub async fn bearer_detached(self: &std::sync::Arc<Self>) -> Option<String> {
        let me = std::sync::Arc::clone(self);
        tokio::spawn(async move { me.bearer().await })
            .await
            .unwrap_or(None)
    }

    /// [`Authorizer::refused`] in a task of its own, for the same reason
    /// as [`Authorizer::bearer_detached`].
    pub async fn refused_detached(
        self: &std::sync::Arc<Self>,
        status: u16,
        www_authenticate: &[String],
    ) -> Result<String, AuthError> {
        let me = std::sync::Arc::clone(self);
        let www = www_authenticate.to_vec();
        tokio::spawn(async move { me.refused(status, &www).await })
            .await
            .unwrap_or_else(|e| Err(AuthError::Http(format!("the authorization stopped: {e}"))))
    }

    /// A request with the token was accepted: the authorizations in a row
    /// start again from zero.
    pub async fn accepted(&self) {
        self.state.lock().await.in_a_row = 0;
    }

    /// The server (`Settings::server`) refused a request with `status`
    /// (401 or 403) and these `WWW-Authenticate` values: obtains a new
    /// access token to retry with, by refreshing, or else by a new
    /// authorization.
    pub async fn refused(
        &self,
        status: u16,
        www_authenticate: &[String],
    ) -> Result<String, AuthError> {
        let server = self.settings.server.as_str();
        let challenge = parse(www_authenticate.iter().map(String::as_str)).unwrap_or_default();
        let step_up = status == 403 && challenge.error.as_deref() == Some("insufficient_scope");
        if status == 403 && !step_up {
            return Err(AuthError::Authorization(format!(
                "{} refused the request with HTTP 403{}",
                shown_url(server),
                challenge
                    .error
                    .as_ref()
                    .map(|e| format!(" ({})", excerpt(e.as_bytes(), 60)))
                    .unwrap_or_default()
            )));
        }
        let mut st = self.state.lock().await;
        self.load(&mut st);
        if challenge.resource_metadata.is_some() {
            st.resource_metadata_url = challenge.resource_metadata.clone();
        }
        if st.in_a_row >= MAX_AUTHORIZATIONS {
            return Err(AuthError::TooManyAttempts(st.in_a_row));
        }
        // An expired token is renewed without a person; but a token just
        // renewed and refused again means the server wants another
        // authorization (it may have moved): discovery instead.
        if !step_up && st.in_a_row == 0 && st.tokens.as_ref().is_some_and(|t| t.refresh.is_some()) {
            st.in_a_row += 1;
            if self.refresh(&mut st).await.is_ok() {
                if let Some(t) = &st.tokens {
                    return Ok(t.access.clone());
                }
            }
        }
        let prior: Vec<String> = st
            .tokens
            .as_ref()
            .map(|t| t.scopes.clone())
            .unwrap_or_default();
        // Discovery again at every authorization: the resource may have
        // moved to another authorization server since.
        let resource =
            metadata::resource_metadata(&self.http, server, challenge.resource_metadata.as_deref())
                .await?;
        let issuer = resource.authorization_servers[0].clone();
        if let Some(pinned) = &self.settings.issuer {
            if *pinned != issuer {
                return Err(AuthError::Discovery(format!(
                    "the server names the authorization server {}, not the configured {}: refused",
                    shown_url(&issuer),
                    shown_url(pinned)
                )));
            }
        }
        let as_metadata = metadata::server_metadata(&self.http, &issuer).await?;
        if st.issuer.as_deref() != Some(issuer.as_str()) {
            // Another authorization server: nothing of the old one's
            // (its client id, its tokens) goes to the new one.
            st.registration = None;
            st.tokens = None;
            st.issuer = Some(issuer.clone());
        }
        let scopes = self.scopes(
            &challenge,
            &resource,
            &as_metadata,
            step_up.then_some(prior),
        );
        st.in_a_row += 1;
        st.server = Some(as_metadata.clone());
        st.resource = Some(resource.resource.clone());
        let tokens = match self.settings.grant {
            Grant::ClientCredentials => {
                // The configured client (no request): kept with the tokens
                // (its secret never is), so the next process uses them.
                let registration = self.register(&as_metadata, DEFAULT_REDIRECT).await?;
                st.registration = Some(registration.clone());
                self.client_credentials(&as_metadata, &registration, &resource.resource, &scopes)
                    .await?
            }
            Grant::AuthorizationCode => {
                // Nobody to authorize: say so before registering a client
                // that would never be used.
                if self.settings.user_agent == UserAgent::None {
                    return Err(self.login_required(&as_metadata));
                }
                let (listener, redirect) = match self.settings.user_agent {
                    UserAgent::Browser => {
                        let listener =
                            tokio::net::TcpListener::bind("127.0.0.1:0")
                                .await
                                .map_err(|e| {
                                    AuthError::Http(format!(
                                        "a loopback port for the redirect: {e}"
                                    ))
                                })?;
                        let port = listener
                            .local_addr()
                            .map_err(|e| AuthError::Http(e.to_string()))?
                            .port();
                        (Some(listener), format!("http://127.0.0.1:{port}/callback"))
                    }
                    _ => (None, DEFAULT_REDIRECT.to_owned()),
                };
                let registration = match &st.registration {
                    Some(r) => r.clone(),
                    None => {
                        let r = self.register(&as_metadata, &redirect).await?;
                        st.registration = Some(r.clone());
                        r
                    }
                };
                let way = Redirect {
                    uri: &redirect,
                    listener,
                };
                self.authorization_code(
                    &as_metadata,
                    &registration,
                    &resource.resource,
                    &scopes,
                    way,
                )
                .await?
            }
        };
        let access = tokens.access.clone();
        st.tokens = Some(tokens);
        self.save(&st)?;
        Ok(access)
    }

    /// Reads what the token file keeps for this server, once. A file that
    /// cannot be used counts as empty (a new authorization then replaces
    /// the entry); a file others can read is never used.
    fn load(&self, st: &mut State) {
        if st.loaded {
            return;
        }
        st.loaded = true;
        let Some(file) = &self.settings.token_file else {
            return;
        };
        let Ok(Some(k)) = file.get(&self.settings.server) else {
            return;
        };
        let method = match k.method.as_str() {
            "client_secret_basic" => Method::Basic,
            "client_secret_post" => Method::Post,
            "private_key_jwt" => Method::PrivateKeyJwt,
            _ => Method::None,
        };
        st.issuer = Some(k.issuer.clone());
        st.resource = Some(k.resource.clone());
        if st.resource_metadata_url.is_none() {
            st.resource_metadata_url = k.resource_metadata_url.clone();
        }
        // A configured client is the configuration's (its secret as the
        // environment has it now); a registered one is the file's.
        st.registration = if self.settings.client_id.is_some() {
            None
        } else {
            Some(Registration {
                client_id: k.client_id.clone(),
                client_secret: k.client_secret.clone(),
                method,
            })
        };
        st.tokens = Some(kept_tokens(k));
    }

    /// Takes the file's tokens for this server when another process has
    /// renewed them since they were read (same authorization server,
    /// another access token).
    fn adopt_newer(&self, st: &mut State) {
        let Some(file) = &self.settings.token_file else {
            return;
        };
        let Ok(Some(k)) = file.get(&self.settings.server) else {
            return;
        };
        let ours = st.tokens.as_ref().map(|t| t.access.as_str());
        if st.issuer.as_deref() == Some(k.issuer.as_str()) && ours != Some(k.access_token.as_str())
        {
            st.tokens = Some(kept_tokens(k));
        }
    }

    /// Writes this server's registration and tokens to the token file
    /// (or removes its entry when there are no tokens).
    fn save(&self, st: &State) -> Result<(), AuthError> {
        let Some(file) = &self.settings.token_file else {
            return Ok(());
        };
        let kept = match (&st.issuer, &st.registration, &st.tokens, &st.resource) {
            (Some(issuer), Some(r), Some(t), Some(resource)) => Some(crate::tokens::Kept {
                issuer: issuer.clone(),
                client_id: r.client_id.clone(),
                // A configured secret stays in the environment, never here.
                client_secret: if self.settings.client_id.is_some() {
                    None
                } else {
                    r.client_secret.clone()
                },
                method: match r.method {
                    Method::Basic => "client_secret_basic",
                    Method::Post => "client_secret_post",
                    Method::None => "none",
                    Method::PrivateKeyJwt => "private_key_jwt",
                }
                .to_owned(),
                access_token: t.access.clone(),
                refresh_token: t.refresh.clone(),
                expires_at: t.expires_at.map(|at| {
                    let left = at.saturating_duration_since(Instant::now()).as_secs();
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs())
                        + left
                }),
                scopes: t.scopes.clone(),
                resource: resource.clone(),
                resource_metadata_url: st.resource_metadata_url.clone(),
            }),
            _ => None,
        };
        file.put(&self.settings.server, kept).map(|_| ())
    }

    /// What the server publishes about its authorization now
    /// ([`metadata::published`]), when authorization is in play for it:
    /// it asked for one in this process, or tokens are kept for it (both
    /// leave an issuer). `Ok(None)` for a server that never asked (nothing
    /// is fetched).
    pub async fn published(&self) -> Result<Option<Vec<u8>>, AuthError> {
        let named = {
            let mut st = self.state.lock().await;
            self.load(&mut st);
            if st.issuer.is_none() && st.resource_metadata_url.is_none() {
                return Ok(None);
            }
            st.resource_metadata_url.clone()
        };
        metadata::published(&self.http, &self.settings.server, named.as_deref())
            .await
            .map(Some)
    }

    /// Forgets this server's tokens and registration, here and in the
    /// token file: whether there were any.
    pub async fn forget(&self) -> Result<bool, AuthError> {
        let mut st = self.state.lock().await;
        *st = State {
            loaded: true,
            ..State::default()
        };
        match &self.settings.token_file {
            Some(file) => file.put(&self.settings.server, None),
            None => Ok(false),
        }
    }

    /// The scopes to ask for: the configured ones; else the challenge's;
    /// else the resource's `scopes_supported`; else none (the parameter
    /// is left out). A step-up asks for the union of what the token had
    /// and what the challenge names. `offline_access` is added where the
    /// authorization server offers it (for a refresh token).
    fn scopes(
        &self,
        challenge: &Challenge,
        resource: &ResourceMetadata,
        server: &ServerMetadata,
        prior: Option<Vec<String>>,
    ) -> Vec<String> {
        let mut scopes = if let Some(configured) = &self.settings.scopes {
            configured.clone()
        } else if !challenge.scopes().is_empty() {
            challenge.scopes()
        } else {
            resource.scopes_supported.clone().unwrap_or_default()
        };
        if let Some(prior) = prior {
            let mut union = prior;
            for s in challenge.scopes().into_iter().chain(scopes) {
                if !union.contains(&s) {
                    union.push(s);
                }
            }
            scopes = union;
        }
        let offered = server
            .scopes_supported
            .as_ref()
            .is_some_and(|s| s.iter().any(|s| s == "offline_access"));
        if offered
            && self.settings.grant == Grant::AuthorizationCode
            && !scopes.iter().any(|s| s == "offline_access")
        {
            scopes.push("offline_access".to_owned());
        }
        scopes
    }

    /// A person must log in at `server`: the error, naming the command.
    fn login_required(&self, server: &ServerMetadata) -> AuthError {
        AuthError::LoginRequired(format!(
            "{} asks a person to authorize{}",
            shown_url(&server.issuer),
            self.settings
                .login_hint
                .as_ref()
                .map(|h| format!(": run `{h}`"))
                .unwrap_or_default()
        ))
    }

    /// This client at `server`: pre-registered (configured), else a
    /// Client ID Metadata Document where it is supported, else dynamic
    /// registration (RFC 7591).
    async fn register(
        &self,
        server: &ServerMetadata,
        redirect: &str,
    ) -> Result<Registration, AuthError> {
        let methods = server.token_endpoint_auth_methods_supported.as_deref();
        let offers = |m: &str| methods.is_some_and(|ms| ms.iter().any(|x| x == m));
        if let Some(id) = &self.settings.client_id {
            let method = match &self.settings.client_secret {
                None if self.settings.client_assertion_key.is_some() => Method::PrivateKeyJwt,
                None => Method::None,
                // RFC 8414: without the list, client_secret_basic.
                Some(_) if methods.is_none() || offers("client_secret_basic") => Method::Basic,
                Some(_) if offers("client_secret_post") => Method::Post,
                Some(_) => Method::Basic,
            };
            return Ok(Registration {
                client_id: id.clone(),
                client_secret: self.settings.client_secret.clone(),
                method,
            });
        }
        if let Some(url) = &self.settings.client_metadata_url {
            if server.client_id_metadata_document_supported == Some(true) {
                return Ok(Registration {
                    client_id: url.clone(),
                    client_secret: None,
                    method: Method::None,
                });
            }
        }
        let Some(endpoint) = &server.registration_endpoint else {
            return Err(AuthError::Registration(format!(
                "{} offers no dynamic registration{}: configure a client id for this server",
                shown_url(&server.issuer),
                if server.client_id_metadata_document_supported == Some(true) {
                    " (it reads client metadata documents: configure client_metadata_url)"
                } else {
                    ""
                }
            )));
        };
        let wanted = if methods.is_none() || offers("none") {
            "none"
        } else if offers("client_secret_basic") {
            "client_secret_basic"
        } else {
            "client_secret_post"
        };
        let body = json!({
            "client_name": "Plumbline",
            "redirect_uris": [redirect],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": wanted,
            "application_type": "native",
        });
        let answer = self.http.post_json(endpoint, &body).await?;
        if !(200..300).contains(&answer.status) {
            return Err(AuthError::Registration(format!(
                "{} answered HTTP {}: {}",
                shown_url(endpoint),
                answer.status,
                excerpt(&answer.body, 200)
            )));
        }
        #[derive(serde::Deserialize)]
        struct Registered {
            client_id: String,
            #[serde(default)]
            client_secret: Option<String>,
            #[serde(default)]
            token_endpoint_auth_method: Option<String>,
        }
        let r: Registered = serde_json::from_slice(&answer.body).map_err(|e| {
            AuthError::Registration(format!("{}: unreadable answer: {e}", shown_url(endpoint)))
        })?;
        let method = match (
            r.token_endpoint_auth_method.as_deref().unwrap_or(wanted),
            &r.client_secret,
        ) {
            (_, None) => Method::None,
            ("client_secret_post", Some(_)) => Method::Post,
            (_, Some(_)) => Method::Basic,
        };
        Ok(Registration {
            client_id: r.client_id,
            client_secret: r.client_secret,
            method,
        })
    }

    fn token_endpoint(server: &ServerMetadata) -> Result<TokenUrl, AuthError> {
        let url = server.token_endpoint.as_deref().ok_or_else(|| {
            AuthError::Discovery(format!(
                "{} names no token endpoint",
                shown_url(&server.issuer)
            ))
        })?;
        TokenUrl::new(url.to_owned())
            .map_err(|e| AuthError::Discovery(format!("token endpoint {}: {e}", shown_url(url))))
    }

    fn code_client(
        &self,
        server: &ServerMetadata,
        r: &Registration,
        redirect: &str,
    ) -> Result<CodeClient, AuthError> {
        let auth = server.authorization_endpoint.as_deref().ok_or_else(|| {
            AuthError::Discovery(format!(
                "{} names no authorization endpoint",
                shown_url(&server.issuer)
            ))
        })?;
        let auth = AuthUrl::new(auth.to_owned()).map_err(|e| {
            AuthError::Discovery(format!("authorization endpoint {}: {e}", shown_url(auth)))
        })?;
        let redirect = RedirectUrl::new(redirect.to_owned())
            .map_err(|e| AuthError::Configuration(format!("redirect URI: {e}")))?;
        let client = BasicClient::new(ClientId::new(r.client_id.clone()))
            .set_auth_uri(auth)
            .set_token_uri(Self::token_endpoint(server)?)
            .set_redirect_uri(redirect);
        Ok(with_secret(client, r))
    }

    async fn authorization_code(
        &self,
        server: &ServerMetadata,
        registration: &Registration,
        resource: &str,
        scopes: &[String],
        way: Redirect<'_>,
    ) -> Result<Tokens, AuthError> {
        let client = self.code_client(server, registration, way.uri)?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(CsrfToken::new_random)
            .set_pkce_challenge(challenge)
            .add_extra_param("resource", resource.to_owned());
        if !scopes.is_empty() {
            request = request.add_scope(Scope::new(scopes.join(" ")));
        }
        let (url, state) = request.url();
        let redirected = match (self.settings.user_agent, way.listener) {
            (UserAgent::Browser, Some(listener)) => {
                crate::browser::authorize_in_browser(listener, url.as_str(), state.secret()).await?
            }
            (UserAgent::FollowRedirect, _) => {
                let answer = self.http.get(url.as_str()).await?;
                match answer.location {
                    Some(l) if (300..400).contains(&answer.status) => l,
                    _ => {
                        return Err(AuthError::Authorization(format!(
                            "the authorization endpoint answered HTTP {} without a redirect",
                            answer.status
                        )))
                    }
                }
            }
            _ => return Err(self.login_required(server)),
        };
        let code = self.read_redirect(&redirected, state.secret(), server, way.uri)?;
        let mut exchange = client
            .exchange_code(AuthorizationCode::new(code))
            .set_pkce_verifier(verifier)
            .add_extra_param("resource", resource.to_owned());
        if let Some(jwt) = self.assertion(registration, server)? {
            exchange = exchange
                .add_extra_param("client_assertion_type", crate::jwt::ASSERTION_TYPE)
                .add_extra_param("client_assertion", jwt);
        }
        let response = exchange
            .request_async(&self.http)
            .await
            .map_err(token_error)?;
        Ok(tokens(&response, scopes))
    }

    /// The authorization code in the redirect: its `state` must be ours,
    /// its `iss` (RFC 9207) the issuer exactly, and present where the
    /// server says it sends one.
    fn read_redirect(
        &self,
        redirected: &str,
        state: &str,
        server: &ServerMetadata,
        redirect: &str,
    ) -> Result<String, AuthError> {
        let base = Url::parse(redirect)
            .map_err(|e| AuthError::Configuration(format!("redirect URI: {e}")))?;
        let url = base
            .join(redirected)
            .map_err(|_| AuthError::Authorization("the redirect is not a URL".to_owned()))?;
        let get = |k: &str| {
            url.query_pairs()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.into_owned())
        };
        match get("iss") {
            Some(iss) if iss != server.issuer => {
                return Err(AuthError::Authorization(format!(
                    "the redirect names the issuer {}, not {}: refused (RFC 9207)",
                    excerpt(iss.as_bytes(), 100),
                    shown_url(&server.issuer)
                )))
            }
            None if server.authorization_response_iss_parameter_supported == Some(true) => {
                return Err(AuthError::Authorization(format!(
                    "{} says it names itself in its redirects (iss), and this one does not: refused (RFC 9207)",
                    shown_url(&server.issuer)
                )))
            }
            _ => {}
        }
        if let Some(error) = get("error") {
            return Err(AuthError::Authorization(format!(
                "{}{}",
                excerpt(error.as_bytes(), 60),
                get("error_description")
                    .map(|d| format!(": {}", excerpt(d.as_bytes(), 200)))
                    .unwrap_or_default()
            )));
        }
        if get("state").as_deref() != Some(state) {
            return Err(AuthError::Authorization(
                "the redirect's state is not the one sent: refused".to_owned(),
            ));
        }
        get("code").ok_or_else(|| AuthError::Authorization("the redirect has no code".to_owned()))
    }

    async fn client_credentials(
        &self,
        server: &ServerMetadata,
        registration: &Registration,
        resource: &str,
        scopes: &[String],
    ) -> Result<Tokens, AuthError> {
        let client: TokenClient = with_secret(
            BasicClient::new(ClientId::new(registration.client_id.clone()))
                .set_token_uri(Self::token_endpoint(server)?),
            registration,
        );
        let mut request = client
            .exchange_client_credentials()
            .add_extra_param("resource", resource.to_owned());
        if let Some(jwt) = self.assertion(registration, server)? {
            request = request
                .add_extra_param("client_assertion_type", crate::jwt::ASSERTION_TYPE)
                .add_extra_param("client_assertion", jwt);
        }
        if !scopes.is_empty() {
            request = request.add_scope(Scope::new(scopes.join(" ")));
        }
        let response = request
            .request_async(&self.http)
            .await
            .map_err(token_error)?;
        Ok(tokens(&response, scopes))
    }

    /// A fresh client assertion where the client authenticates with its
    /// key; addressed to the authorization server's issuer.
    fn assertion(
        &self,
        r: &Registration,
        server: &ServerMetadata,
    ) -> Result<Option<String>, AuthError> {
        match (r.method, &self.settings.client_assertion_key) {
            (Method::PrivateKeyJwt, Some(key)) => {
                key.assertion(&r.client_id, &server.issuer).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Renews the access token with the refresh token (rotated when the
    /// server sends a new one); drops the tokens when the server refuses.
    async fn refresh(&self, st: &mut State) -> Result<(), AuthError> {
        // Tokens read from the file come without the server's metadata.
        if st.server.is_none() {
            if let Some(issuer) = st.issuer.clone() {
                st.server = Some(metadata::server_metadata(&self.http, &issuer).await?);
            }
        }
        // A configured client is taken from the configuration (no request).
        if st.registration.is_none() && self.settings.client_id.is_some() {
            if let Some(server) = &st.server {
                st.registration = Some(self.register(server, DEFAULT_REDIRECT).await?);
            }
        }
        let (Some(server), Some(registration), Some(resource)) = (
            st.server.clone(),
            st.registration.clone(),
            st.resource.clone(),
        ) else {
            return Err(AuthError::LoginRequired("nothing to renew".to_owned()));
        };
        // Another process (a cron `observe` beside a `watch`) may have
        // renewed these tokens since they were read: its newer ones win,
        // and a refresh token it spent is not offered again.
        self.adopt_newer(st);
        if st
            .tokens
            .as_ref()
            .and_then(|t| t.expires_at)
            .is_some_and(|at| at > Instant::now() + RENEW_BEFORE)
        {
            return Ok(());
        }
        let Some(old) = st.tokens.as_ref().and_then(|t| t.refresh.clone()) else {
            return Err(AuthError::LoginRequired("no refresh token".to_owned()));
        };
        let client = self.code_client(&server, &registration, DEFAULT_REDIRECT)?;
        let refresh = RefreshToken::new(old.clone());
        let mut request = client
            .exchange_refresh_token(&refresh)
            .add_extra_param("resource", resource);
        if let Some(jwt) = self.assertion(&registration, &server)? {
            request = request
                .add_extra_param("client_assertion_type", crate::jwt::ASSERTION_TYPE)
                .add_extra_param("client_assertion", jwt);
        }
        let result = request.request_async(&self.http).await;
        match result {
            Ok(response) => {
                let scopes = st
                    .tokens
                    .as_ref()
                    .map(|t| t.scopes.clone())
                    .unwrap_or_default();
                let mut renewed = tokens(&response, &scopes);
                if renewed.refresh.is_none() {
                    renewed.refresh = Some(old);
                }
                st.tokens = Some(renewed);
                // Kept in memory even if the file cannot be written: the
                // old refresh token is spent.
                self.save(st)
            }
            Err(e) => {
                let e = token_error(e);
                // Only a refusal of the grant ends the refresh token (an
                // outage, a timeout, an unreadable answer do not); the
                // file forgets it only if it still holds that one.
                if matches!(e, AuthError::LoginRequired(_)) {
                    st.tokens = None;
                    if let Some(file) = &self.settings.token_file {
                        let _ = file.update(&self.settings.server, |kept| {
                            kept.filter(|k| k.refresh_token.as_deref() != Some(old.as_str()))
                                .cloned()
                        });
                    }
                }
                Err(e)
            }
        }
    }
}

/// The tokens of a token file entry, its expiry moved to this process's
/// clock (at most a year ahead).
fn kept_tokens(k: crate::tokens::Kept) -> Tokens {
    let now_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Tokens {
        access: k.access_token,
        refresh: k.refresh_token,
        expires_at: k.expires_at.map(|at| {
            Instant::now() + Duration::from_secs(at.saturating_sub(now_unix)).min(MAX_LIFETIME)
        }),
        scopes: k.scopes,
    }
}

fn with_secret<A, B, C, D, E>(
    client: BasicClient<A, B, C, D, E>,
    r: &Registration,
) -> BasicClient<A, B, C, D, E>
where
    A: oauth2::EndpointState,
    B: oauth2::EndpointState,
    C: oauth2::EndpointState,
    D: oauth2::EndpointState,
    E: oauth2::EndpointState,
{
    match (&r.client_secret, r.method) {
        (Some(secret), Method::Basic) => client
            .set_client_secret(ClientSecret::new(secret.clone()))
            .set_auth_type(AuthType::BasicAuth),
        (Some(secret), Method::Post) => client
            .set_client_secret(ClientSecret::new(secret.clone()))
            .set_auth_type(AuthType::RequestBody),
        _ => client.set_auth_type(AuthType::RequestBody),
    }
}

fn tokens(response: &oauth2::basic::BasicTokenResponse, asked: &[String]) -> Tokens {
    Tokens {
        access: response.access_token().secret().clone(),
        refresh: response.refresh_token().map(|r| r.secret().clone()),
        // At most a year: a hostile `expires_in` must not overflow.
        expires_at: response
            .expires_in()
            .map(|d| Instant::now() + d.min(MAX_LIFETIME)),
        scopes: response
            .scopes()
            .map(|s| s.iter().map(|s| s.to_string()).collect())
            .unwrap_or_else(|| asked.to_vec()),
    }
}

fn token_error(
    e: RequestTokenError<HttpClientError<reqwest::Error>, BasicErrorResponse>,
) -> AuthError {
    match e {
        RequestTokenError::ServerResponse(r) => {
            let text = r.to_string();
            let refused = matches!(
                r.error(),
                oauth2::basic::BasicErrorResponseType::InvalidGrant
            );
            let message = excerpt(text.as_bytes(), 200);
            if refused {
                AuthError::LoginRequired(format!(
                    "the token endpoint refused the grant ({message})"
                ))
            } else {
                AuthError::Token(message)
            }
        }
        RequestTokenError::Request(e) => AuthError::Http(match e {
            HttpClientError::Reqwest(e) => crate::http::describe(*e),
            other => excerpt(other.to_string().as_bytes(), 200),
        }),
        RequestTokenError::Parse(e, _) => AuthError::Token(format!(
            "unreadable answer: {}",
            excerpt(e.to_string().as_bytes(), 200)
        )),
        RequestTokenError::Other(text) => AuthError::Token(excerpt(text.as_bytes(), 200)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authorizer() -> Authorizer {
        Authorizer::new(
            Settings::default(),
            Duration::from_secs(1),
            Duration::from_secs(1),
        )
        .unwrap()
    }

    fn server(iss_supported: Option<bool>, scopes: Option<&[&str]>) -> ServerMetadata {
        serde_json::from_value(json!({
            "issuer": "http://localhost:9",
            "authorization_response_iss_parameter_supported": iss_supported,
            "scopes_supported": scopes,
        }))
        .unwrap()
    }

    #[test]
    fn the_redirect_must_carry_our_state_and_exactly_the_issuer() {
        let a = authorizer();
        let s = server(Some(true), None);
        let at = |q: &str| format!("http://127.0.0.1/callback?{q}");
        assert_eq!(
            a.read_redirect(
                &at("code=c&state=s&iss=http%3A%2F%2Flocalhost%3A9"),
                "s",
                &s,
                DEFAULT_REDIRECT
            )
            .unwrap(),
            "c"
        );
        // Advertised but missing; a trailing slash; another issuer; the
        // wrong state; an error.
        for q in [
            "code=c&state=s",
            "code=c&state=s&iss=http%3A%2F%2Flocalhost%3A9%2F",
            "code=c&state=s&iss=https%3A%2F%2Fevil.example.com",
            "code=c&state=t&iss=http%3A%2F%2Flocalhost%3A9",
            "error=access_denied&state=s&iss=http%3A%2F%2Flocalhost%3A9",
        ] {
            assert!(
                a.read_redirect(&at(q), "s", &s, DEFAULT_REDIRECT).is_err(),
                "{q}"
            );
        }
        // Not advertised: none is fine, a wrong one is not.
        let s = server(None, None);
        assert!(a
            .read_redirect(&at("code=c&state=s"), "s", &s, DEFAULT_REDIRECT)
            .is_ok());
        assert!(a
            .read_redirect(
                &at("code=c&state=s&iss=https%3A%2F%2Fevil.example.com"),
                "s",
                &s,
                DEFAULT_REDIRECT
            )
            .is_err());
    }

    #[test]
    fn scopes_come_from_the_challenge_then_the_resource_and_step_up_unites() {
        let a = authorizer();
        let resource: ResourceMetadata = serde_json::from_value(json!({
            "resource": "http://localhost:3/mcp",
            "authorization_servers": ["http://localhost:9"],
            "scopes_supported": ["r1", "r2"]
        }))
        .unwrap();
        let none = Challenge::default();
        let asked = Challenge {
            scope: Some("mcp:write".to_owned()),
            ..Challenge::default()
        };
        let plain = server(None, None);
        assert_eq!(a.scopes(&none, &resource, &plain, None), ["r1", "r2"]);
        assert_eq!(a.scopes(&asked, &resource, &plain, None), ["mcp:write"]);
        assert_eq!(
            a.scopes(
                &asked,
                &resource,
                &plain,
                Some(vec!["mcp:basic".to_owned()])
            ),
            ["mcp:basic", "mcp:write"]
        );
        let offline = server(None, Some(&["r1", "offline_access"]));
        assert_eq!(
            a.scopes(&asked, &resource, &offline, None),
            ["mcp:write", "offline_access"]
        );
    }
}
