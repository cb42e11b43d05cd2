//! Images (PNG, JPEG, WebP, GIF) and documents (PDF) sent inline: the same sandbox as text files,
//! recognised by their first bytes (never by extension alone), under a size cap.
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

/// Largest document a call sends through the Files API (Gemini reads PDFs of up to 50 MB).
pub const MAX_DOCUMENT_BYTES: u64 = 50 * 1024 * 1024;

/// Most bytes of documents one call sends through the Files API.
pub const MAX_DOCUMENTS_BYTES: u64 = 100 * 1024 * 1024;

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

/// What one inline image costs, as budgeted and estimated (Gemini's image tokens are not counted
/// locally).
pub const IMAGE_TOKENS: u64 = 3_000;

/// What Gemini bills a PDF page (its documentation: 258 tokens a page, text and images alike).
pub const PDF_PAGE_TOKENS: u64 = 258;

/// The MIME type of a document from its first bytes.
pub fn sniff_document(bytes: &[u8]) -> Option<&'static str> {
    bytes.starts_with(b"%PDF-").then_some("application/pdf")
}

/// Pages of a PDF, counted from its page objects (`/Type /Page`, not `/Pages`); at least one.
/// An estimate for the budget and the caps: a PDF with compressed object streams hides its page
/// objects, and counts as one page.
/// Linear (memchr's searcher), so a document of 50 MB is counted in milliseconds.
pub fn pdf_pages(bytes: &[u8]) -> u64 {
    let mut n = 0u64;
    for key in [&b"/Type /Page"[..], &b"/Type/Page"[..]] {
        n += memchr::memmem::find_iter(bytes, key)
            .filter(|i| bytes.get(i + key.len()) != Some(&b's'))
            .count() as u64;
    }
    n.max(1)
}

/// Tokens of inline data as budgeted and estimated: a PDF by its pages, an image at the flat
/// rate.
pub fn inline_tokens(mime: &str, data: &[u8]) -> u64 {
    if mime == "application/pdf" {
        pdf_pages(data) * PDF_PAGE_TOKENS
    } else {
        IMAGE_TOKENS
    }
}

/// What inline data is read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Image,
    Document,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Kind::Image => "image",
            Kind::Document => "document",
        }
    }

    fn with_article(self) -> &'static str {
        match self {
            Kind::Image => "an image",
            Kind::Document => "a document",
        }
    }
}

impl Collector {
    /// Reads the images named by `paths` to send inline, refusing the whole call over the caps.
    pub fn images(&self, paths: &[String]) -> Result<Vec<ImageEntry>, CollectError> {
        read_images(
            self,
            paths,
            Kind::Image,
            (MAX_IMAGE_BYTES, MAX_INLINE_IMAGES_BYTES),
        )
    }

    /// Reads the documents (PDF) named by `paths`: with `uploads` (the backend's Files API takes
    /// what does not fit inline) each up to [`MAX_DOCUMENT_BYTES`], [`MAX_DOCUMENTS_BYTES`] in
    /// all; else in what is left of the inline cap once `images_bytes` of images are counted.
    /// Refused, naming the file, over the cap or when a file is not a PDF.
    pub fn documents(
        &self,
        paths: &[String],
        images_bytes: u64,
        uploads: bool,
    ) -> Result<Vec<ImageEntry>, CollectError> {
        let (each, all) = if uploads {
            (MAX_DOCUMENT_BYTES, MAX_DOCUMENTS_BYTES)
        } else {
            (MAX_IMAGE_BYTES, MAX_INLINE_IMAGES_BYTES.saturating_sub(images_bytes))
        };
        read_images(self, paths, Kind::Document, (each, all))
    }
}

/// Reads `paths` as `kind`, each file up to `caps.0` bytes, all of them up to `caps.1`.
fn read_images(
    c: &Collector,
    paths: &[String],
    kind: Kind,
    caps: (u64, u64),
) -> Result<Vec<ImageEntry>, CollectError> {
    let (max_each, cap_total) = caps;
    // Over the inline cap a document goes through the Files API: its limit is not inline.
    let where_ = if max_each > MAX_IMAGE_BYTES { "" } else { "inline " };
    let noun = kind.noun();
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
            return Err(err(format!("is a directory, not {}", kind.with_article())));
        }
        if !meta.file_type().is_file() {
            return Err(err("is not a regular file".into()));
        }
        let too_large = || {
            err(format!(
                "is larger than the {} MB {where_}{noun} limit",
                max_each >> 20
            ))
        };
        if meta.len() > max_each {
            return Err(too_large());
        }
        total += meta.len();
        if total > cap_total {
            let advice = match kind {
                Kind::Image => "send fewer images, or smaller ones (crop or downscale screenshots, or save them as JPEG or WebP)",
                Kind::Document => "send fewer or smaller documents (or the pages that matter, printed to a smaller PDF), or fewer images beside them",
            };
            return Err(err(format!(
                "the {noun}s up to this one come to {:.1} MB, over the {:.1} MB a call may send of them (inline, Gemini takes 20 MB per request and base64 adds a third); {advice}",
                total as f64 / (1024.0 * 1024.0),
                cap_total as f64 / (1024.0 * 1024.0)
            )));
        }
        checked.push((raw, p));
    }
    // A file that grew since its metadata was read still cannot take the total over the cap.
    let mut left = cap_total;
    let mut out: Vec<ImageEntry> = Vec::with_capacity(checked.len());
    for (raw, p) in checked {
        let err = |message: String| CollectError::Image {
            path: raw.clone(),
            message,
        };
        let too_large = || {
            err(format!(
                "is larger than the {} MB {where_}{noun} limit",
                max_each >> 20
            ))
        };
        let cap = left.min(max_each);
        let bytes = read::open(&p, cap)
            .and_then(|f| f.read_bytes(cap, false, || {}))
            .map_err(|u| match u {
                Unread::TooLarge => too_large(),
                Unread::NotRegular => err("is not a regular file".into()),
                Unread::Changed => err("changed while being read; try again".into()),
                Unread::Binary | Unread::Unreadable => err("cannot be read".into()),
            })?;
        left -= bytes.len() as u64;
        let mime = match kind {
            Kind::Image => {
                sniff(&bytes).ok_or_else(|| err("is not a PNG, JPEG, WebP or GIF image".into()))?
            }
            Kind::Document => sniff_document(&bytes).ok_or_else(|| {
                err("is named .pdf but is not a PDF (it does not begin with %PDF-)".into())
            })?,
        };
        if kind == Kind::Document {
            // A document cannot be redacted as text is: one whose readable text holds a
            // secret-looking value is not sent at all (compressed streams are not read).
            let (_, found) = crate::redact::redact_counted(&String::from_utf8_lossy(&bytes));
            if let Some((rule, _)) = found.iter().next() {
                return Err(err(format!(
                    "holds a secret-looking value ({rule}); a document is sent as it is and cannot be redacted, so it is not sent: remove the value, or send the text that matters as a file"
                )));
            }
        }
        let tokens = inline_tokens(mime, &bytes);
        out.push(ImageEntry {
            tokens,
            display: c.sandbox().display(&p),
            path: p.as_path().to_path_buf(),
            mime: mime.to_string(),
            data: Arc::new(bytes),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pdf_is_known_by_its_first_bytes_and_counted_by_its_page_objects() {
        let pdf = b"%PDF-1.7\n<< /Type /Pages /Count 3 >>\n<< /Type /Page >>\n<< /Type/Page >>\n<</Type /Page>>";
        assert_eq!(sniff_document(pdf), Some("application/pdf"));
        assert_eq!(sniff_document(b"PDF-1.7"), None);
        assert_eq!(pdf_pages(pdf), 3);
        // Object streams hide the pages: one, never none.
        assert_eq!(pdf_pages(b"%PDF-1.7\n"), 1);
        assert_eq!(inline_tokens("application/pdf", pdf), 3 * PDF_PAGE_TOKENS);
        assert_eq!(inline_tokens("image/png", pdf), IMAGE_TOKENS);
    }
}
