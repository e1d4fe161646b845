//! Images a client sends: base64 (bare or as a `data:` URL) or a path to a file on the
//! server's machine; never fetched from the network (the server works offline).
//!
//! Every image is bounded before it is decoded (its encoded length, then its bytes), and
//! must be PNG or JPEG; its pixel size is checked from its header by the image code later.

use std::path::Path;

use base64::Engine;

use crate::error::{Error, Result};
use crate::input_file::{self, InputKind};

/// The most bytes one image may have, decoded: the limit on a screenshot file.
pub const MAX_IMAGE_BYTES: usize = InputKind::Image.max_bytes() as usize;

/// An image from `text`: base64, or a `data:image/...;base64,` URL.
pub fn image_from_base64(text: &str) -> Result<Vec<u8>> {
    let payload = match text.strip_prefix("data:") {
        Some(url) => data_url_payload(url)?,
        None => text,
    };
    // Four characters carry three bytes: refuse before decoding anything too large.
    if payload.len() / 4 * 3 > MAX_IMAGE_BYTES {
        return Err(too_large(payload.len() / 4 * 3));
    }
    let engine = base64::engine::general_purpose::STANDARD;
    let bytes = if payload.bytes().any(|b| b.is_ascii_whitespace()) {
        let compact: String = payload
            .chars()
            .filter(|c| !c.is_ascii_whitespace())
            .collect();
        engine.decode(compact)
    } else {
        engine.decode(payload)
    }
    .map_err(|e| Error::invalid_input_caused("the image is not valid base64", e))?;
    check_format(bytes)
}

/// An image from an OpenAI `image_url`: a `data:` URL, a `file://` URL or an absolute path.
pub fn image_from_url(url: &str) -> Result<Vec<u8>> {
    if url.starts_with("data:") {
        return image_from_base64(url);
    }
    if url.starts_with("http://") || url.starts_with("https://") {
        return Err(Error::invalid_input(
            "images are not fetched from the network (the server works offline): send a \
             data: URL or a file path",
        ));
    }
    let path = url.strip_prefix("file://").unwrap_or(url);
    image_from_path(Path::new(path))
}

/// An image file on the server's machine; the path must be absolute (the server's working
/// directory means nothing to a client).
pub fn image_from_path(path: &Path) -> Result<Vec<u8>> {
    if !path.is_absolute() {
        return Err(Error::invalid_input(format!(
            "image path {}: give an absolute path, a data: URL or base64",
            path.display()
        )));
    }
    check_format(input_file::read_bytes(path, InputKind::Image)?)
}

fn data_url_payload(url: &str) -> Result<&str> {
    let (meta, payload) = url
        .split_once(',')
        .ok_or_else(|| Error::invalid_input("a data: URL needs a comma before its payload"))?;
    let Some(mime) = meta.strip_suffix(";base64") else {
        return Err(Error::invalid_input(
            "a data: URL image must be base64 (data:image/png;base64,...)",
        ));
    };
    if !mime.to_ascii_lowercase().starts_with("image/") {
        return Err(Error::invalid_input(format!(
            "a data: URL of type {mime:?} is not an image"
        )));
    }
    Ok(payload)
}

fn check_format(bytes: Vec<u8>) -> Result<Vec<u8>> {
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(too_large(bytes.len()));
    }
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n";
    const JPEG: &[u8] = b"\xff\xd8\xff";
    if bytes.starts_with(PNG) || bytes.starts_with(JPEG) {
        Ok(bytes)
    } else {
        Err(Error::image("only PNG and JPEG images are read"))
    }
}

fn too_large(bytes: usize) -> Error {
    Error::invalid_input(format!(
        "the image has {} MiB, over the limit of {} MiB",
        bytes >> 20,
        MAX_IMAGE_BYTES >> 20
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

    #[test]
    fn base64_images_arrive_bare_as_data_urls_and_wrapped_in_lines() -> Result<()> {
        let bare = image_from_base64(PNG_1X1)?;
        let url = image_from_url(&format!("data:image/png;base64,{PNG_1X1}"))?;
        let (head, tail) = PNG_1X1.split_at(20);
        let wrapped = image_from_base64(&format!("{head}\n{tail}\n"))?;
        assert_eq!(bare, url);
        assert_eq!(bare, wrapped);
        assert!(bare.starts_with(b"\x89PNG"));
        Ok(())
    }

    #[test]
    fn bad_images_are_refused_with_what_is_wrong() {
        let cases = [
            ("data:image/png;base64,@@@@", "base64"),
            ("data:text/plain;base64,aGk=", "not an image"),
            ("data:image/png,rawbytes", "must be base64"),
            ("data:image/png;base64,aGVsbG8gd29ybGQ=", "PNG and JPEG"),
            ("https://example.com/a.png", "offline"),
            ("relative/a.png", "absolute"),
        ];
        for (url, says) in cases {
            match image_from_url(url) {
                Ok(_) => panic!("{url} was accepted"),
                Err(e) => assert!(e.to_string().contains(says), "{url}: {e}"),
            }
        }
        let huge = "A".repeat(MAX_IMAGE_BYTES / 3 * 4 + 8);
        match image_from_base64(&huge) {
            Ok(_) => panic!("an image over the limit was accepted"),
            Err(e) => assert!(e.to_string().contains("over the limit"), "{e}"),
        }
    }
}
