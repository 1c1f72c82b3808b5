//! The file handling of `--cache-dir` when others may write in it: what stands at a name is
//! looked at (`lstat`) before it is used, and never followed.
//!
//! - A temporary file (`*.tmp`) is created new ([`create_tmp`]): whatever stands at its name
//!   is removed first ([`clear`]: a file, a symbolic link or a special file is unlinked, a
//!   directory is refused), then the file is created with `O_CREAT | O_EXCL`
//!   (`create_new`), mode 0600. POSIX makes `O_EXCL` fail (`EEXIST`) when the name is a
//!   symbolic link, dangling or not, so a link planted between the removal and the creation
//!   fails the write; it is never followed. (`O_NOFOLLOW` would add nothing to `O_EXCL` here,
//!   and its value differs between targets: std does not name it.)
//! - A file that is read ([`open_regular`]) must be a regular file under its name: a symbolic
//!   link, a directory or a special file (a FIFO would block the open) is refused, and the
//!   file opened must be the one `lstat` saw (same device and inode), so a swap in between is
//!   refused too. (A swap to a FIFO in that instant would still block the open: std names no
//!   `O_NONBLOCK` either; only someone who may write in the directory can try it, which is
//!   what the directory's mode warning is about.)
//! - The directory is created 0700 ([`create_dir`]); one that others may write to is worth a
//!   warning ([`open_to_others`]).
//!
//! Modes are asked of `open`/`mkdir`, which the umask can only narrow.

use std::fs::{self, DirBuilder, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The mode of every file grid-wrapper writes in `--cache-dir`.
pub(crate) const FILE_MODE: u32 = 0o600;
/// The mode of the directory when grid-wrapper creates it.
pub(crate) const DIR_MODE: u32 = 0o700;

/// What stood at a name that [`clear`] emptied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Cleared {
    /// Nothing.
    Nothing,
    /// A regular file of this many bytes (a write that was interrupted).
    File(u64),
    /// Something grid-wrapper never writes there, described (`a symbolic link to /etc/x`).
    Foreign(String),
}

/// What stands at a name, for a log line: `a symbolic link to …`, `a directory`, `a FIFO`, ….
pub(crate) fn describe(path: &Path, meta: &Metadata) -> String {
    let t = meta.file_type();
    if t.is_symlink() {
        match fs::read_link(path) {
            Ok(to) => format!("a symbolic link to {}", to.display()),
            Err(_) => "a symbolic link".to_string(),
        }
    } else if t.is_dir() {
        "a directory".to_string()
    } else if t.is_fifo() {
        "a FIFO".to_string()
    } else if t.is_socket() {
        "a socket".to_string()
    } else if t.is_block_device() || t.is_char_device() {
        "a device node".to_string()
    } else {
        "a regular file".to_string()
    }
}

/// Empties the name `path` without following it: a regular file, a symbolic link or a special
/// file is unlinked; a directory is refused with an error naming it (nothing in it is
/// touched). Says what was there.
pub(crate) fn clear(path: &Path) -> io::Result<Cleared> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Cleared::Nothing),
        Err(e) => return Err(e),
    };
    if meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{} is a directory, not a file grid-wrapper wrote: remove it",
                path.display()
            ),
        ));
    }
    let what = if meta.is_file() {
        Cleared::File(meta.len())
    } else {
        Cleared::Foreign(describe(path, &meta))
    };
    match fs::remove_file(path) {
        Ok(()) => Ok(what),
        // Removed meanwhile: the name is empty all the same.
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(what),
        Err(e) => Err(e),
    }
}

/// Creates `path` for writing, new, mode [`FILE_MODE`], after [`clear`] removed whatever stood
/// there (returned: the caller warns about a [`Cleared::Foreign`] one). Never writes through a
/// symbolic link (see the module docs).
pub(crate) fn create_tmp(path: &Path) -> io::Result<(File, Cleared)> {
    let cleared = clear(path)?;
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
        .map_err(|e| match e.kind() {
            // Something was put there again between the removal and the creation.
            io::ErrorKind::AlreadyExists => io::Error::new(
                e.kind(),
                format!(
                    "{} reappeared as soon as it was removed ({e}): someone else writes there",
                    path.display()
                ),
            ),
            _ => e,
        })?;
    Ok((file, cleared))
}

/// What [`open_regular`] found at a name.
#[derive(Debug)]
pub(crate) enum Found {
    /// Nothing.
    Missing,
    /// The regular file, opened for reading, and its metadata.
    File(File, Metadata),
    /// Something else, not opened, described (`a symbolic link to /etc/x`).
    Foreign(String),
}

/// Opens `path` for reading only if it is a regular file (not a symbolic link to one), and is
/// still the file `lstat` saw when it is opened.
pub(crate) fn open_regular(path: &Path) -> io::Result<Found> {
    let seen = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Found::Missing),
        Err(e) => return Err(e),
    };
    if !seen.is_file() {
        return Ok(Found::Foreign(describe(path, &seen)));
    }
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Found::Missing),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if (meta.dev(), meta.ino()) != (seen.dev(), seen.ino()) || !meta.is_file() {
        return Ok(Found::Foreign(
            "a file replaced while it was being opened".to_string(),
        ));
    }
    Ok(Found::File(file, meta))
}

/// Narrows an opened file of ours to [`FILE_MODE`] when others may read or write it (a file
/// written before files were 0600); its previous mode if it was changed.
pub(crate) fn tighten(file: &File, meta: &Metadata) -> io::Result<Option<u32>> {
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 == 0 {
        return Ok(None);
    }
    file.set_permissions(fs::Permissions::from_mode(FILE_MODE))?;
    Ok(Some(mode))
}

/// Creates `dir` (and its missing parents) with mode [`DIR_MODE`]; an existing one is left as
/// it is. An error if `dir` is not a directory (a symbolic link to one is fine: the operator's).
pub(crate) fn create_dir(dir: &Path) -> io::Result<Metadata> {
    DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)?;
    let meta = fs::metadata(dir)?;
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} is not a directory", dir.display()),
        ));
    }
    Ok(meta)
}

/// The warning about a directory of `mode` that users other than its owner may write to
/// (group or others have `w`), `None` when they cannot.
pub(crate) fn open_to_others(dir: &Path, mode: u32) -> Option<String> {
    let mode = mode & 0o7777;
    if mode & 0o022 == 0 {
        return None;
    }
    Some(format!(
        "--cache-dir {} has mode {mode:04o}: users other than its owner can write in it, so they can replace or remove the snapshot a restart serves (and its RV epoch); make it 0700 (chmod 0700 {})",
        dir.display(),
        dir.display()
    ))
}
