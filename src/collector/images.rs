//! Images sent inline (PNG, JPEG, WebP, GIF): the same sandbox as text files, recognised by
//! their first bytes (never by extension), under a size cap.
//!
//! Gemini accepts at most 20 MB of inline data per request, and inline images travel as base64
//! (a third larger). Every image is checked from its metadata first, the total included, so a
//! call with too many large images is refused before any is read into memory.

use std::path::Path;
use std::sync::Arc;

use super::read::{self, Unread};
use super::sandbox::SandboxedPath;
use super::entry::ImageEntry;
use super::{CollectError, Collector, secrets};

/// Most bytes of images one call sends inline: as base64 (×4/3) that is about 18.7 MB, under
/// the API's 20 MB request limit with room left for the text.
pub const MAX_INLINE_IMAGES_BYTES: u64 = 14 * 1024 * 1024;

/// Largest image sent inline.
pub const MAX_IMAGE_BYTES: u64 = MAX_INLINE_IMAGES_BYTES;

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

impl Collector {
    /// Reads the images named by `paths` to send inline, refusing the whole call over the caps.
    pub fn images(&self, paths: &[String]) -> Result<Vec<ImageEntry>, CollectError> {
        read_images(self, paths)
    }
}

fn read_images(c: &Collector, paths: &[String]) -> Result<Vec<ImageEntry>, CollectError> {
    // Everything that can be known without reading comes first, the total size included.
    let mut checked: Vec<(&String, SandboxedPath)> = Vec::with_capacity(paths.len());
    let mut total = 0u64;
    for raw in paths {
        let p = c.sandbox().resolve(raw)?;
        let given = secrets::name_rule(Path::new(raw)).map(str::to_string);
        if let Some(rule) = given.or_else(|| c.secret_rule(&p)) {
            return Err(CollectError::SecretRefused {
                path: raw.clone(),
                rule,
            });
        }
        if checked.iter().any(|(_, q)| q.as_path() == p.as_path()) {
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
        total += meta.len();
        if total > MAX_INLINE_IMAGES_BYTES {
            return Err(err(format!(
                "the images up to this one come to {:.1} MB, over the {} MB a call sends inline (Gemini takes 20 MB per request, and base64 adds a third); send fewer images, or smaller ones (crop or downscale screenshots, or save them as JPEG or WebP)",
                total as f64 / (1024.0 * 1024.0),
                MAX_INLINE_IMAGES_BYTES >> 20
            )));
        }
        checked.push((raw, p));
    }
    // A file that grew since its metadata was read still cannot take the total over the cap.
    let mut left = MAX_INLINE_IMAGES_BYTES;
    let mut out: Vec<ImageEntry> = Vec::with_capacity(checked.len());
    for (raw, p) in checked {
        let err = |message: String| CollectError::Image {
            path: raw.clone(),
            message,
        };
        let too_large = || {
            err(format!(
                "is larger than the {} MB inline image limit",
                MAX_IMAGE_BYTES >> 20
            ))
        };
        let cap = left.min(MAX_IMAGE_BYTES);
        let bytes = read::open(&p, cap)
            .and_then(|f| f.read_bytes(cap, false, || {}))
            .map_err(|u| match u {
                Unread::TooLarge => too_large(),
                Unread::NotRegular => err("is not a regular file".into()),
                Unread::Changed => err("changed while being read; try again".into()),
                Unread::Binary | Unread::Unreadable => err("cannot be read".into()),
            })?;
        left -= bytes.len() as u64;
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
