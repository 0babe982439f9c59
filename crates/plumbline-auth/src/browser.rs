//! A person authorizes in a browser: the authorization URL is opened (and
//! printed, for a machine without one) and the authorization server's
//! redirect arrives on a loopback port (RFC 8252 §7.3), read within a
//! size limit and answered with a page saying it can be closed.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::error::AuthError;

/// How long a person has to authorize.
const WAIT: Duration = Duration::from_secs(300);
/// The most bytes of a request line and headers read from the browser.
const MAX_REQUEST: usize = 16 << 10;

/// Opens `url` and waits on `listener` for the redirect to `/callback`
/// that carries `state`: its path and query. Anything else that reaches
/// the port (another path, another state) is answered and ignored.
pub async fn authorize_in_browser(
    listener: TcpListener,
    url: &str,
    state: &str,
) -> Result<String, AuthError> {
    eprintln!("Open this URL in a browser to authorize Plumbline:\n\n  {url}\n");
    open(url);
    tokio::time::timeout(WAIT, receive(listener, state))
        .await
        .map_err(|_| {
            AuthError::Authorization(format!(
                "nobody authorized within {} minutes",
                WAIT.as_secs() / 60
            ))
        })?
}

/// Starts the browser: `PLUMBLINE_BROWSER` (a program and its arguments,
/// split at spaces, the URL appended), else `xdg-open`, else `open`. A
/// failure is not an error: the URL is printed.
fn open(url: &str) {
    let candidates: Vec<Vec<String>> = match std::env::var("PLUMBLINE_BROWSER") {
        Ok(command) if !command.trim().is_empty() => {
            vec![command.split_whitespace().map(str::to_owned).collect()]
        }
        _ => vec![vec!["xdg-open".to_owned()], vec!["open".to_owned()]],
    };
    for mut words in candidates {
        let program = words.remove(0);
        let started = std::process::Command::new(&program)
            .args(&words)
            .arg(url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if let Ok(mut child) = started {
            // Reaped in the background; its exit changes nothing.
            std::thread::spawn(move || child.wait());
            return;
        }
    }
}

/// Whether `target` (a request's path and query) is the redirect: the
/// path `/callback` exactly, and our `state`.
fn is_the_redirect(target: &str, state: &str) -> bool {
    let Ok(url) = url::Url::parse(&format!("http://127.0.0.1{target}")) else {
        return false;
    };
    url.path() == "/callback" && url.query_pairs().any(|(k, v)| k == "state" && v == state)
}

async fn receive(listener: TcpListener, state: &str) -> Result<String, AuthError> {
    loop {
        let (mut socket, _) = listener
            .accept()
            .await
            .map_err(|e| AuthError::Authorization(format!("the loopback redirect: {e}")))?;
        let mut head = Vec::new();
        let mut buf = [0u8; 2048];
        let read = tokio::time::timeout(Duration::from_secs(10), async {
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST {
                let n = socket.read(&mut buf).await?;
                if n == 0 {
                    break;
                }
                head.extend_from_slice(&buf[..n]);
            }
            Ok::<_, std::io::Error>(())
        })
        .await;
        if !matches!(read, Ok(Ok(()))) {
            continue;
        }
        let line = String::from_utf8_lossy(&head);
        let target = line
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("GET "))
            .and_then(|l| l.split(' ').next())
            .unwrap_or("")
            .to_owned();
        if !target.starts_with('/') || !is_the_redirect(&target, state) {
            let _ = socket
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let page = "<!doctype html><title>Plumbline</title><p>Plumbline received the authorization. You can close this window.";
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n{page}",
            page.len()
        );
        let _ = socket.write_all(answer.as_bytes()).await;
        return Ok(target);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_our_callback_with_our_state_is_the_redirect() {
        let ok = |t: &str| super::is_the_redirect(t, "s1");
        assert!(ok("/callback?code=c&state=s1"));
        assert!(ok("/callback?state=s1&code=c&iss=x"));
        assert!(!ok("/callback?code=c&state=s2"));
        assert!(!ok("/callbackx?code=c&state=s1"));
        assert!(!ok("/callback/x?state=s1"));
        assert!(!ok("/favicon.ico"));
        assert!(!ok("/callback?code=c"));
    }
}
