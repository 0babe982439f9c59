//! The one file reader Plumbline uses for files it is pointed at.

use std::path::Path;

use anyhow::{bail, Context as _};

/// Reads a file Plumbline was pointed at (the registry, the lock, a saved
/// listing) as UTF-8, bounded: a FIFO, a device or a directory is refused
/// before reading; a file larger than `max` bytes is refused; and so is a
/// file that holds more than its size says (a `/proc` or `/sys` file, such
/// as `/proc/self/environ` behind a symbolic link), so that no error can
/// quote what such a file holds. No error quotes the file's content.
pub fn read_file(path: &Path, max: u64) -> anyhow::Result<String> {
    use std::io::Read as _;
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if !meta.is_file() {
        bail!("{}: not a regular file", path.display());
    }
    if meta.len() > max {
        bail!(
            "{}: {} bytes, more than the {max} it may have",
            path.display(),
            meta.len()
        );
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(max.saturating_add(1)).read_to_end(&mut bytes))
        .with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() as u64 > meta.len() {
        bail!(
            "{}: holds more than its size ({} bytes) says: not an ordinary file (a /proc or /sys file?), so not read",
            path.display(),
            meta.len()
        );
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{}: not UTF-8 text (at byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}
