//! The bundle archive: the single file a job is uploaded as.
//!
//! A gzip-compressed tar with exactly two regular files at its root:
//! `weir.toml` (the manifest) and `component.wasm` (the component). Reading
//! one never touches the file system: entries are read into memory, and an
//! archive is refused if an entry's path is absolute or climbs out (`..`),
//! if it holds links or devices, or if it unpacks to more than a limit.

use std::io::Read;
use std::path::Component;

/// The manifest's name in a bundle.
pub const MANIFEST_FILE: &str = "weir.toml";
/// The component's name in a bundle archive.
pub const COMPONENT_FILE: &str = "component.wasm";

/// Why an archive is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BundleError {
    /// Not a gzip-compressed tar.
    #[error("not a bundle archive (a .tar.gz): {0}")]
    NotAnArchive(String),
    /// An entry's path leaves the archive's root.
    #[error("the archive entry `{0}` has a path outside the bundle")]
    PathEscape(String),
    /// A link, device or other non-regular entry.
    #[error("the archive entry `{0}` is not a regular file or directory")]
    NotAFile(String),
    /// Unpacks to more than the limit.
    #[error("the archive unpacks to more than {0} bytes")]
    TooLarge(u64),
    /// A required file is missing.
    #[error("the archive has no `{0}`")]
    Missing(&'static str),
    /// The manifest is not UTF-8.
    #[error("`weir.toml` is not UTF-8 text")]
    NotText,
}

/// The contents of a bundle archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleFiles {
    /// The manifest's text.
    pub manifest: String,
    /// The component's bytes.
    pub component: Vec<u8>,
}

/// Write a bundle archive.
///
/// ```
/// use weir_model::bundle::{pack, unpack, BundleFiles};
/// let files = BundleFiles { manifest: "[job]\nname = 'j'\n".into(), component: b"\0asm".to_vec() };
/// let archive = pack(&files).unwrap();
/// assert_eq!(unpack(&archive, 1 << 20).unwrap(), files);
/// ```
pub fn pack(files: &BundleFiles) -> std::io::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::default(),
    ));
    for (name, bytes) in [
        (MANIFEST_FILE, files.manifest.as_bytes()),
        (COMPONENT_FILE, &files.component[..]),
    ] {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, name, bytes)?;
    }
    tar.into_inner()?.finish()
}

/// Read a bundle archive into memory, refusing unsafe or oversized ones.
/// `limit` bounds the total unpacked size.
pub fn unpack(archive: &[u8], limit: u64) -> Result<BundleFiles, BundleError> {
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    let entries = tar
        .entries()
        .map_err(|e| BundleError::NotAnArchive(e.to_string()))?;
    let (mut manifest, mut component) = (None, None);
    let mut total: u64 = 0;
    for entry in entries {
        let mut entry = entry.map_err(|e| BundleError::NotAnArchive(e.to_string()))?;
        let path = entry
            .path()
            .map_err(|e| BundleError::NotAnArchive(e.to_string()))?
            .into_owned();
        let shown = path.display().to_string();
        if path
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(BundleError::PathEscape(shown));
        }
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            continue;
        }
        if !kind.is_file() {
            return Err(BundleError::NotAFile(shown));
        }
        let mut bytes = Vec::new();
        let budget = limit.saturating_sub(total);
        (&mut entry)
            .take(budget + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| BundleError::NotAnArchive(e.to_string()))?;
        total += bytes.len() as u64;
        if total > limit {
            return Err(BundleError::TooLarge(limit));
        }
        let name: Vec<_> = path
            .components()
            .filter(|c| !matches!(c, Component::CurDir))
            .collect();
        match name.as_slice() {
            [Component::Normal(n)] if *n == MANIFEST_FILE => {
                manifest = Some(String::from_utf8(bytes).map_err(|_| BundleError::NotText)?)
            }
            [Component::Normal(n)] if *n == COMPONENT_FILE => component = Some(bytes),
            // Other files (a README, sources) travel along and are ignored.
            _ => {}
        }
    }
    Ok(BundleFiles {
        manifest: manifest.ok_or(BundleError::Missing(MANIFEST_FILE))?,
        component: component.ok_or(BundleError::Missing(COMPONENT_FILE))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw_tar(name: &[u8], kind: tar::EntryType, body: &[u8]) -> Vec<u8> {
        // Build the header by hand so that unsafe names can be written.
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..name.len()].copy_from_slice(name);
        header.set_size(body.len() as u64);
        header.set_entry_type(kind);
        header.set_mode(0o644);
        header.set_cksum();
        let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::default(),
        ));
        tar.append(&header, body).unwrap();
        tar.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn refuses_escapes_links_garbage_and_bombs() {
        let escape = raw_tar(b"../evil", tar::EntryType::Regular, b"x");
        assert_eq!(
            unpack(&escape, 100),
            Err(BundleError::PathEscape("../evil".into()))
        );
        let absolute = raw_tar(b"/etc/passwd", tar::EntryType::Regular, b"x");
        assert!(matches!(
            unpack(&absolute, 100),
            Err(BundleError::PathEscape(_))
        ));
        let link = raw_tar(b"weir.toml", tar::EntryType::Symlink, b"");
        assert!(matches!(unpack(&link, 100), Err(BundleError::NotAFile(_))));
        assert!(matches!(
            unpack(b"plain text", 100),
            Err(BundleError::NotAnArchive(_))
        ));
        let big = raw_tar(b"component.wasm", tar::EntryType::Regular, &[0; 1000]);
        assert_eq!(unpack(&big, 999), Err(BundleError::TooLarge(999)));
        let only_manifest = raw_tar(b"weir.toml", tar::EntryType::Regular, b"[job]");
        assert_eq!(
            unpack(&only_manifest, 100),
            Err(BundleError::Missing(COMPONENT_FILE))
        );
    }
}
