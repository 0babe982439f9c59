//! The client's side of a stdio guard, read and written without a thread
//! hop per message.
//!
//! Tokio's `stdin()` and `stdout()` do every read and write on its
//! blocking pool (a terminal or a file cannot be polled), which costs a
//! round of thread hand-offs per message each way. A client that starts
//! the guard gives it pipes (or sockets), which can be: a copy of the
//! descriptor is made non-blocking and polled by the runtime
//! (`tokio::net::unix::pipe`, or a Unix stream for a socket). Anything else (a terminal, a file) falls back to
//! Tokio's. Setting `O_NONBLOCK` changes the open file description, which
//! the client shares only while it keeps its own copy of our end (clients
//! close theirs); it is set back when the guard ends.

use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::sys::stat::SFlag;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::unix::pipe;

/// A pipe end or a socket polled by the runtime; the descriptor's flags
/// are put back on drop.
pub struct Pipe {
    inner: Inner,
    /// A copy of the descriptor and its flags before.
    restore: (OwnedFd, OFlag),
}

enum Inner {
    Reader(pipe::Receiver),
    Writer(pipe::Sender),
    Socket(tokio::net::UnixStream),
}

impl Pipe {
    /// A polled copy of `fd` (to read from, or to write to), when it is a
    /// pipe or a socket.
    fn of(fd: impl AsFd, read: bool) -> Option<Pipe> {
        let stat = nix::sys::stat::fstat(fd.as_fd()).ok()?;
        let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
        let owned: OwnedFd = fd.as_fd().try_clone_to_owned().ok()?;
        let restore = fd.as_fd().try_clone_to_owned().ok()?;
        let flags = OFlag::from_bits_truncate(fcntl(&owned, FcntlArg::F_GETFL).ok()?);
        let inner = if kind == SFlag::S_IFIFO {
            if read {
                Inner::Reader(pipe::Receiver::from_owned_fd(owned).ok()?)
            } else {
                Inner::Writer(pipe::Sender::from_owned_fd(owned).ok()?)
            }
        } else if kind == SFlag::S_IFSOCK {
            // libuv (Node.js) gives a child socket pairs for its stdio.
            let socket = std::os::unix::net::UnixStream::from(owned);
            socket.set_nonblocking(true).ok()?;
            Inner::Socket(tokio::net::UnixStream::from_std(socket).ok()?)
        } else {
            return None;
        };
        Some(Pipe {
            inner,
            restore: (restore, flags),
        })
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        let _ = fcntl(&self.restore.0, FcntlArg::F_SETFL(self.restore.1));
    }
}

impl AsyncRead for Pipe {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match &mut self.get_mut().inner {
            Inner::Reader(r) => Pin::new(r).poll_read(cx, buf),
            Inner::Socket(s) => Pin::new(s).poll_read(cx, buf),
            Inner::Writer(_) => Poll::Ready(Err(std::io::ErrorKind::Unsupported.into())),
        }
    }
}

impl AsyncWrite for Pipe {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match &mut self.get_mut().inner {
            Inner::Writer(w) => Pin::new(w).poll_write(cx, data),
            Inner::Socket(s) => Pin::new(s).poll_write(cx, data),
            Inner::Reader(_) => Poll::Ready(Err(std::io::ErrorKind::Unsupported.into())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match &mut self.get_mut().inner {
            Inner::Writer(w) => Pin::new(w).poll_flush(cx),
            Inner::Socket(s) => Pin::new(s).poll_flush(cx),
            Inner::Reader(_) => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // Standard output stays open: the process's end closes it.
        Poll::Ready(Ok(()))
    }
}

/// Standard input for the relay: a polled pipe where it is one.
pub fn stdin() -> Pin<Box<dyn AsyncRead + Send>> {
    match Pipe::of(std::io::stdin(), true) {
        Some(p) => Box::pin(p),
        None => Box::pin(tokio::io::stdin()),
    }
}

/// Standard output for the relay: a polled pipe where it is one.
pub fn stdout() -> Pin<Box<dyn AsyncWrite + Send>> {
    match Pipe::of(std::io::stdout(), false) {
        Some(p) => Box::pin(p),
        None => Box::pin(tokio::io::stdout()),
    }
}

/// Whether `fd` would be polled (a pipe or a socket).
pub fn polled(fd: impl AsFd) -> bool {
    Pipe::of(fd, true).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn a_pipe_is_polled_and_carries_bytes_both_ways_and_a_file_is_not() {
        let (r, w) = std::io::pipe().unwrap();
        let mut reader = Pipe::of(&r, true).expect("a pipe is polled");
        let mut writer = Pipe::of(&w, false).expect("a pipe is polled");
        writer.write_all(b"{\"jsonrpc\":\"2.0\"}\n").await.unwrap();
        let mut got = [0u8; 18];
        reader.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"{\"jsonrpc\":\"2.0\"}\n");
        drop(writer);
        drop(w);
        assert_eq!(reader.read(&mut got).await.unwrap(), 0, "end of stream");
        // The flags are put back.
        drop(reader);
        let flags = OFlag::from_bits_truncate(fcntl(&r, FcntlArg::F_GETFL).unwrap());
        assert!(!flags.contains(OFlag::O_NONBLOCK));
        let file = tempfile::tempfile().unwrap();
        assert!(!polled(&file));
        // A socket pair, as Node.js gives its children.
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut a = Pipe::of(&a, false).expect("a socket is polled");
        let mut b = Pipe::of(&b, true).expect("a socket is polled");
        a.write_all(b"x\n").await.unwrap();
        let mut one = [0u8; 2];
        b.read_exact(&mut one).await.unwrap();
        assert_eq!(&one, b"x\n");
    }
}
