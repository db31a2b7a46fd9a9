//! The bundle archive: the single file a job is uploaded as.
//!
//! A gzip-compressed tar with `weir.toml` (the manifest) at its root and the
//! job's components: `component.wasm` for a job of one component, or
//! `components/NAME.wasm` for each component of a job written in several
//! (one per language, say), named as the manifest's `[components]` table
//! names them, or none for a job of built-in operators only. Reading one never touches the file system: those files are
//! read into memory (others are read past), and an archive is refused if an
//! entry's path is
//! absolute or climbs out (`..`), if it holds links or devices, more than
//! [`MAX_ENTRIES`] entries, a manifest over [`MAX_MANIFEST`], or if it
//! unpacks to more than a limit or to more than [`MAX_RATIO`] times its own
//! size (a compression bomb).

use std::io::Read;
use std::path::Component;

/// The manifest's name in a bundle.
pub const MANIFEST_FILE: &str = "weir.toml";
/// The component's name in a bundle archive of one component.
pub const COMPONENT_FILE: &str = "component.wasm";
/// The directory of the components of a bundle of several.
pub const COMPONENTS_DIR: &str = "components";
/// The name of a bundle's component when it has only one (its
/// `component.wasm`).
pub const DEFAULT_COMPONENT: &str = "main";

/// Whether `name` may name a component: 1 to 64 lowercase ASCII letters,
/// digits, `-` and `_`.
///
/// ```
/// assert!(weir_model::bundle::valid_component_name("py-ops_2"));
/// assert!(!weir_model::bundle::valid_component_name("../x"));
/// assert!(!weir_model::bundle::valid_component_name(""));
/// ```
pub fn valid_component_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// The most entries (files and directories) an archive may hold: a bundle
/// has two files, and an archive of millions of empty entries costs
/// seconds of CPU to walk.
pub const MAX_ENTRIES: usize = 1_000;

/// The largest manifest, in bytes.
pub const MAX_MANIFEST: u64 = 1 << 20;

/// How many times its own size an archive may unpack to, beyond
/// [`RATIO_FLOOR`]: compiled code compresses 3–5×, a gzip bomb 1,000×.
pub const MAX_RATIO: u64 = 100;

/// What any archive may unpack to, whatever its ratio.
pub const RATIO_FLOOR: u64 = 16 << 20;

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
    /// More entries than [`MAX_ENTRIES`].
    #[error("the archive has more than {0} entries")]
    TooManyEntries(usize),
    /// A file over its own limit.
    #[error("the archive's `{0}` is larger than {1} bytes")]
    FileTooLarge(&'static str, u64),
    /// Unpacks to far more than its own size.
    #[error("the archive unpacks to more than {0} times its size (a compression bomb?)")]
    Bomb(u64),
    /// A required file is missing.
    #[error("the archive has no `{0}`")]
    Missing(&'static str),
    /// A component's file is not named as a component may be.
    #[error(
        "the archive entry `{0}` is not a component: components are `components/NAME.wasm`, NAME of lowercase letters, digits, `-` and `_`"
    )]
    BadComponentName(String),
    /// Both `component.wasm` and `components/`.
    #[error(
        "the archive has both `component.wasm` and `components/`: a bundle has one or the other"
    )]
    MixedComponents,
    /// The manifest is not UTF-8.
    #[error("`weir.toml` is not UTF-8 text")]
    NotText,
}

/// The contents of a bundle archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleFiles {
    /// The manifest's text.
    pub manifest: String,
    /// Each component's name and bytes, in name order: one named
    /// [`DEFAULT_COMPONENT`] for a bundle of one component.
    pub components: Vec<(String, Vec<u8>)>,
}

impl BundleFiles {
    /// A bundle of one component.
    pub fn single(manifest: String, component: Vec<u8>) -> BundleFiles {
        BundleFiles {
            manifest,
            components: vec![(DEFAULT_COMPONENT.to_owned(), component)],
        }
    }

    /// Whether the bundle is a single `component.wasm`.
    fn is_single(&self) -> bool {
        matches!(self.components.as_slice(), [(n, _)] if n == DEFAULT_COMPONENT)
    }
}

/// Write a bundle archive.
///
/// ```
/// use weir_model::bundle::{pack, unpack, BundleFiles};
/// let files = BundleFiles::single("[job]\nname = 'j'\n".into(), b"\0asm".to_vec());
/// let archive = pack(&files).unwrap();
/// assert_eq!(unpack(&archive, 1 << 20).unwrap(), files);
/// let several = BundleFiles {
///     manifest: "[job]\nname = 'j'\n".into(),
///     components: vec![("js".into(), b"\0asm1".to_vec()), ("py".into(), b"\0asm2".to_vec())],
/// };
/// assert_eq!(unpack(&pack(&several).unwrap(), 1 << 20).unwrap(), several);
/// ```
pub fn pack(files: &BundleFiles) -> std::io::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::default(),
    ));
    let mut entries = vec![(MANIFEST_FILE.to_owned(), files.manifest.as_bytes())];
    if files.is_single() {
        entries.push((COMPONENT_FILE.to_owned(), &files.components[0].1[..]));
    } else {
        for (name, bytes) in &files.components {
            entries.push((format!("{COMPONENTS_DIR}/{name}.wasm"), &bytes[..]));
        }
    }
    for (name, bytes) in entries {
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
    let ratio_limit = (archive.len() as u64)
        .saturating_mul(MAX_RATIO)
        .max(RATIO_FLOOR);
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    let entries = tar
        .entries()
        .map_err(|e| BundleError::NotAnArchive(e.to_string()))?;
    let mut manifest = None;
    let mut single = None;
    let mut components: Vec<(String, Vec<u8>)> = Vec::new();
    let mut total: u64 = 0;
    for (n, entry) in entries.enumerate() {
        if n >= MAX_ENTRIES {
            return Err(BundleError::TooManyEntries(MAX_ENTRIES));
        }
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
        let name: Vec<_> = path
            .components()
            .filter(|c| !matches!(c, Component::CurDir))
            .collect();
        let mut component_name = None;
        let which = match name.as_slice() {
            [Component::Normal(n)] if *n == MANIFEST_FILE => Some(MANIFEST_FILE),
            [Component::Normal(n)] if *n == COMPONENT_FILE => Some(COMPONENT_FILE),
            [Component::Normal(dir), Component::Normal(file)] if *dir == COMPONENTS_DIR => {
                let file = file.to_string_lossy();
                match file.strip_suffix(".wasm") {
                    Some(n) if valid_component_name(n) => {
                        component_name = Some(n.to_owned());
                        Some(COMPONENTS_DIR)
                    }
                    _ => return Err(BundleError::BadComponentName(shown)),
                }
            }
            // Other files (a README, sources) travel along, read past.
            _ => None,
        };
        let budget = limit.min(ratio_limit).saturating_sub(total);
        let budget = match which {
            Some(MANIFEST_FILE) => budget.min(MAX_MANIFEST),
            _ => budget,
        };
        let mut bytes = Vec::new();
        let read = match which {
            Some(_) => (&mut entry).take(budget + 1).read_to_end(&mut bytes),
            None => std::io::copy(&mut (&mut entry).take(budget + 1), &mut std::io::sink())
                .map(|n| n as usize),
        }
        .map_err(|e| BundleError::NotAnArchive(e.to_string()))?;
        total += read as u64;
        if which == Some(MANIFEST_FILE) && read as u64 > MAX_MANIFEST {
            return Err(BundleError::FileTooLarge(MANIFEST_FILE, MAX_MANIFEST));
        }
        if total > limit {
            return Err(BundleError::TooLarge(limit));
        }
        if total > ratio_limit {
            return Err(BundleError::Bomb(MAX_RATIO));
        }
        match which {
            Some(MANIFEST_FILE) => {
                manifest = Some(String::from_utf8(bytes).map_err(|_| BundleError::NotText)?)
            }
            Some(COMPONENT_FILE) => single = Some(bytes),
            Some(_) => {
                let name = component_name.expect("a component's entry has its name");
                components.retain(|(n, _)| *n != name);
                components.push((name, bytes));
            }
            None => {}
        }
    }
    let manifest = manifest.ok_or(BundleError::Missing(MANIFEST_FILE))?;
    let components = match (single, components.is_empty()) {
        (Some(_), false) => return Err(BundleError::MixedComponents),
        (Some(bytes), true) => vec![(DEFAULT_COMPONENT.to_owned(), bytes)],
        // A job of sources, built-in operators and sinks has no component
        // (planning refuses a function that no component exports).
        (None, true) => Vec::new(),
        (None, false) => {
            components.sort_by(|a, b| a.0.cmp(&b.0));
            components
        }
    };
    Ok(BundleFiles {
        manifest,
        components,
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
    fn refuses_an_archive_of_too_many_entries_quickly() {
        let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::default(),
        ));
        for i in 0..MAX_ENTRIES + 10 {
            let mut header = tar::Header::new_gnu();
            header.set_size(0);
            header.set_mode(0o644);
            header.set_cksum();
            tar.append_data(&mut header, format!("e{i}"), &[][..])
                .unwrap();
        }
        let archive = tar.into_inner().unwrap().finish().unwrap();
        assert_eq!(
            unpack(&archive, 1 << 30),
            Err(BundleError::TooManyEntries(MAX_ENTRIES))
        );
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
        // A compression bomb: far more than its size, though under the limit.
        let zeros = vec![0; (RATIO_FLOOR + (1 << 20)) as usize];
        let bomb = raw_tar(b"component.wasm", tar::EntryType::Regular, &zeros);
        assert!(bomb.len() < 1 << 20, "{}", bomb.len());
        assert_eq!(unpack(&bomb, 1 << 30), Err(BundleError::Bomb(MAX_RATIO)));
        // An ignored file counts too.
        let other = raw_tar(b"data.bin", tar::EntryType::Regular, &zeros);
        assert_eq!(unpack(&other, 1 << 30), Err(BundleError::Bomb(MAX_RATIO)));
        let manifest = vec![b'#'; (MAX_MANIFEST + 1) as usize];
        let long = raw_tar(b"weir.toml", tar::EntryType::Regular, &manifest);
        assert_eq!(
            unpack(&long, 1 << 30),
            Err(BundleError::FileTooLarge(MANIFEST_FILE, MAX_MANIFEST))
        );
        let odd = raw_tar(b"components/Py.wasm", tar::EntryType::Regular, b"x");
        assert!(matches!(
            unpack(&odd, 100),
            Err(BundleError::BadComponentName(_))
        ));
        let no_manifest = raw_tar(b"component.wasm", tar::EntryType::Regular, b"\0asm");
        assert_eq!(
            unpack(&no_manifest, 100),
            Err(BundleError::Missing(MANIFEST_FILE))
        );
        // A manifest alone is a job of built-in operators: no component.
        let only_manifest = raw_tar(b"weir.toml", tar::EntryType::Regular, b"[job]");
        let files = unpack(&only_manifest, 100).unwrap();
        assert_eq!(
            (files.manifest.as_str(), files.components.len()),
            ("[job]", 0)
        );
        let again = BundleFiles {
            manifest: "[job]".into(),
            components: Vec::new(),
        };
        assert_eq!(unpack(&pack(&again).unwrap(), 100).unwrap(), again);
    }
}
