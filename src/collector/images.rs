//! Images sent inline (PNG, JPEG, WebP, GIF): the same sandbox as text files, recognised by
//! their first bytes (never by extension), under a size cap.

use std::path::Path;
use std::sync::Arc;

use super::read::{self, Unread};
use super::{CollectError, Collector, ImageEntry, secrets};

/// Largest image sent inline.
pub const MAX_IMAGE_BYTES: u64 = 20 * 1024 * 1024;

/// The MIME type of an image from its first bytes.
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

pub fn read_images(c: &Collector, paths: &[String]) -> Result<Vec<ImageEntry>, CollectError> {
    let mut out: Vec<ImageEntry> = Vec::with_capacity(paths.len());
    for raw in paths {
        let p = c.sandbox().resolve(raw)?;
        let given = secrets::name_rule(Path::new(raw)).map(str::to_string);
        if let Some(rule) = given.or_else(|| c.secret_rule(&p)) {
            return Err(CollectError::SecretRefused {
                path: raw.clone(),
                rule,
            });
        }
        if out.iter().any(|i| i.path == p.as_path()) {
            continue;
        }
        let err = |message: String| CollectError::Image {
            path: raw.clone(),
            message,
        };
        let meta = std::fs::metadata(p.as_path()).map_err(|e| err(e.to_string()))?;
        if meta.is_dir() {
            return Err(err("is a directory, not an image".into()));
        }
        if !meta.file_type().is_file() {
            return Err(err("is not a regular file".into()));
        }
        let too_large = || {
            err(format!(
                "is larger than the {} MB inline image limit",
                MAX_IMAGE_BYTES >> 20
            ))
        };
        if meta.len() > MAX_IMAGE_BYTES {
            return Err(too_large());
        }
        let bytes = read::open(&p, MAX_IMAGE_BYTES)
            .and_then(|f| f.read_bytes(MAX_IMAGE_BYTES, false, || {}))
            .map_err(|u| match u {
                Unread::TooLarge => too_large(),
                Unread::NotRegular => err("is not a regular file".into()),
                Unread::Changed => err("changed while being read; try again".into()),
                Unread::Binary | Unread::Unreadable => err("cannot be read".into()),
            })?;
        let mime =
            sniff(&bytes).ok_or_else(|| err("is not a PNG, JPEG, WebP or GIF image".into()))?;
        out.push(ImageEntry {
            display: c.sandbox().display(&p),
            path: p.as_path().to_path_buf(),
            mime: mime.to_string(),
            data: Arc::new(bytes),
        });
    }
    Ok(out)
}
