//! Atomic file replacement: write a temporary file beside the target, make
//! it durable, then rename it over the target. A crash at any point leaves
//! either the old file or the new one, never a mix or a truncated file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes the temporary files of concurrent saves in one process.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// Replaces `path` by a file holding `bytes`, atomically. On failure the
/// temporary file is removed and `path` is as it was.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let temp = temp_path(path)?;
    let result = write_and_rename(&temp, path, bytes);
    if result.is_err() {
        let _ = fs::remove_file(&temp); // best effort: the error that matters is `result`'s
    }
    result
}

fn write_and_rename(temp: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    // `create_new`: never write through a file someone else made at that name.
    let mut file = OpenOptions::new().write(true).create_new(true).open(temp)?;
    file.write_all(bytes)?;
    // The data must be on disk before the rename makes it the file's content.
    file.sync_all()?;
    drop(file);
    fs::rename(temp, path)?;
    // Make the rename itself durable where directories can be synced (Unix);
    // elsewhere opening a directory fails, and the rename is all there is.
    if let Ok(dir) = File::open(directory_of(path)) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// `dir/.name.<pid>.<n>.tmp`: in the target's directory, so the rename
/// never crosses file systems, and hidden, so a crash leaves no file that
/// looks like a model.
fn temp_path(path: &Path) -> io::Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names a directory, not a file"))?;
    let n = NEXT_TEMP.fetch_add(1, Ordering::Relaxed);
    let temp_name = format!(".{}.{}.{n}.tmp", name.to_string_lossy(), std::process::id());
    Ok(directory_of(path).join(temp_name))
}

fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}
