//! Bytes to RGB: PNG/JPEG decoding with header-first size checks, and the reference's
//! conversion of every pixel format to 8-bit RGB.
//!
//! The reference (transformers' `convert_to_rgb` on a Pillow image) composites any
//! transparency over white with Pillow's integer `alpha_composite`, takes the high byte
//! of 16-bit colour channels (how Pillow loads 16-bit RGB/RGBA/LA PNGs). One deliberate
//! difference: Pillow loads 16-bit grayscale as `I;16`, whose conversion to RGB clips each
//! value at 255, so almost every pixel of a real 16-bit screenshot turns white; Sightline
//! takes the high byte there too (scaling, like the colour formats), a faithful image
//! instead of a silent wrong answer. Every other case is checked against Pillow by
//! `tests/all/image_preprocess.rs`.
//!
//! A decompression bomb (a small PNG declaring a huge canvas) is refused from its header:
//! the side and pixel limits of [`InputLimits`], and [`MAX_DECODED_IMAGE_BYTES`] on the
//! buffer the decoder would allocate (width × height × bytes per pixel), before decoding.

use std::borrow::Cow;
use std::io::Cursor;

use image::{DynamicImage, ImageDecoder, ImageError, ImageFormat, ImageReader, RgbImage};

use super::config::InputLimits;
use crate::error::{Error, Result};

/// Largest pixel buffer a screenshot may decode to: an 8K RGBA screenshot is 133 MB, the
/// same at 16 bits 265 MB; a 10,000 × 10,000 16-bit RGBA bomb (800 MB) is refused.
pub const MAX_DECODED_IMAGE_BYTES: u64 = 512 << 20;

/// Decodes PNG or JPEG `bytes`, checking the size in the header against `limits`
/// before any pixel buffer is allocated.
///
/// Errors ([`Error::Image`]): an unrecognized or unsupported format, a header whose
/// size is zero or over the limits, corrupt or truncated data.
pub fn decode(bytes: &[u8], limits: &InputLimits) -> Result<DynamicImage> {
    let mut reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| Error::image_caused("cannot read image bytes", e))?;
    match reader.format() {
        Some(ImageFormat::Png | ImageFormat::Jpeg) => {}
        Some(other) => {
            return Err(Error::image(format!(
                "unsupported image format {other:?}: expected PNG or JPEG"
            )))
        }
        None => {
            return Err(Error::image(format!(
                "unrecognized image format ({} bytes, starting {:02x?}): expected PNG or JPEG",
                bytes.len(),
                &bytes[..bytes.len().min(8)]
            )))
        }
    }
    let mut decoder_limits = image::Limits::default();
    decoder_limits.max_image_width = Some(limits.max_side);
    decoder_limits.max_image_height = Some(limits.max_side);
    // 16-bit RGBA is the widest format PNG decodes to: 8 bytes a pixel, plus headroom
    // for the decoder's own row buffers.
    decoder_limits.max_alloc = Some(limits.max_pixels.saturating_mul(8) + (64 << 20));
    reader.limits(decoder_limits);
    let decoder = reader.into_decoder().map_err(decode_error)?;
    let (width, height) = decoder.dimensions();
    limits.check(width, height)?;
    let decoded_bytes = decoder.total_bytes();
    if decoded_bytes > MAX_DECODED_IMAGE_BYTES {
        return Err(Error::image(format!(
            "image is {width}×{height} and would decode to {decoded_bytes} bytes, over the \
             {MAX_DECODED_IMAGE_BYTES} byte limit"
        )));
    }
    DynamicImage::from_decoder(decoder).map_err(decode_error)
}

/// Decodes `bytes` ([`decode`]) and converts them to RGB as the reference does
/// ([`to_rgb`]).
pub fn decode_rgb(bytes: &[u8], limits: &InputLimits) -> Result<RgbImage> {
    let image = decode(bytes, limits)?;
    Ok(match image {
        DynamicImage::ImageRgb8(rgb) => rgb,
        other => to_rgb(&other)?.into_owned(),
    })
}

fn decode_error(e: ImageError) -> Error {
    match e {
        ImageError::Unsupported(e) => Error::image_caused("unsupported image", e),
        ImageError::Limits(e) => Error::image_caused("image exceeds the decoding limits", e),
        ImageError::IoError(e) => Error::image_caused("image data is truncated or unreadable", e),
        other => Error::image_caused("image data is corrupt", other),
    }
}

/// Converts any decoded image to 8-bit RGB exactly as the reference's `convert_to_rgb`
/// does on the same image opened by Pillow (see the module doc). An RGB8 image is
/// borrowed, not copied. Errors only on a zero-sized image.
pub fn to_rgb(image: &DynamicImage) -> Result<Cow<'_, RgbImage>> {
    let (width, height) = (image.width(), image.height());
    if width == 0 || height == 0 {
        return Err(Error::image(format!(
            "image is {width}×{height}: an image needs at least one pixel on each side"
        )));
    }
    let n = width as usize * height as usize;
    let mut out = Vec::with_capacity(n * 3);
    match image {
        DynamicImage::ImageRgb8(rgb) => return Ok(Cow::Borrowed(rgb)),
        DynamicImage::ImageLuma8(img) => {
            for &l in img.as_raw() {
                out.extend_from_slice(&[l, l, l]);
            }
        }
        DynamicImage::ImageLumaA8(img) => {
            for px in img.as_raw().chunks_exact(2) {
                let l = over_white(px[0], px[1]);
                out.extend_from_slice(&[l, l, l]);
            }
        }
        DynamicImage::ImageRgba8(img) => rgba_over_white(img.as_raw(), &mut out),
        DynamicImage::ImageLuma16(img) => {
            // Scaled like the colour formats, not clipped as Pillow's I;16 is (module doc).
            for &l in img.as_raw() {
                let l = high_byte(l);
                out.extend_from_slice(&[l, l, l]);
            }
        }
        DynamicImage::ImageLumaA16(img) => {
            for px in img.as_raw().chunks_exact(2) {
                let l = over_white(high_byte(px[0]), high_byte(px[1]));
                out.extend_from_slice(&[l, l, l]);
            }
        }
        DynamicImage::ImageRgb16(img) => out.extend(img.as_raw().iter().map(|&v| high_byte(v))),
        DynamicImage::ImageRgba16(img) => {
            let rgba: Vec<u8> = img.as_raw().iter().map(|&v| high_byte(v)).collect();
            rgba_over_white(&rgba, &mut out);
        }
        // Float images never come from PNG/JPEG; a caller's own float image is taken
        // through the image crate's 0..1 → 0..255 conversion, then composited.
        other => rgba_over_white(other.to_rgba8().as_raw(), &mut out),
    }
    RgbImage::from_raw(width, height, out)
        .map(Cow::Owned)
        .ok_or_else(|| Error::internal("RGB buffer size mismatch"))
}

/// Pillow loads 16-bit PNG colour channels by keeping the most significant byte.
fn high_byte(v: u16) -> u8 {
    (v >> 8) as u8
}

fn rgba_over_white(rgba: &[u8], out: &mut Vec<u8>) {
    for px in rgba.chunks_exact(4) {
        let a = px[3];
        if a == 255 {
            // Opaque (every screenshot): the composite is the identity, pinned by a test.
            out.extend_from_slice(&px[..3]);
        } else {
            out.extend_from_slice(&[
                over_white(px[0], a),
                over_white(px[1], a),
                over_white(px[2], a),
            ]);
        }
    }
}

/// One channel of Pillow's `alpha_composite(white, src)` (libImaging/AlphaComposite.c),
/// with the destination fixed to opaque white: integer arithmetic with 7 extra bits
/// of precision and rounded divisions by 255.
pub(crate) fn over_white(c: u8, a: u8) -> u8 {
    const PRECISION_BITS: u32 = 7;
    let shift_for_div255 = |v: u32| ((v >> 8) + v) >> 8;
    if a == 0 {
        return 255;
    }
    let (c, a) = (u32::from(c), u32::from(a));
    let blend = 255 * (255 - a);
    let outa255 = a * 255 + blend;
    let coef1 = a * 255 * 255 * (1 << PRECISION_BITS) / outa255;
    let coef2 = 255 * (1 << PRECISION_BITS) - coef1;
    let tmp = c * coef1 + 255 * coef2;
    (shift_for_div255(tmp + (0x80 << PRECISION_BITS)) >> PRECISION_BITS) as u8
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    /// A PNG whose chunks are garbage is an [`Error::Image`] that reads as before (reason,
    /// then the decoder's message) and keeps the `image` crate's error as its source.
    #[test]
    fn a_corrupt_png_is_an_image_error_with_the_decoders_error_as_source() -> Result<()> {
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        png.extend_from_slice(&[0, 0, 0, 13, b'I', b'H', b'D', b'R']);
        png.extend_from_slice(b"not a header at all, and no CRC");
        let err = match decode(&png, &InputLimits::default()) {
            Ok(_) => return Err(Error::internal("a corrupt PNG decoded")),
            Err(err) => err,
        };
        let Error::Image { reason, .. } = &err else {
            return Err(Error::internal(format!(
                "expected an image error, got {err}"
            )));
        };
        let source = err
            .source()
            .ok_or_else(|| Error::internal(format!("no source: {err}")))?;
        assert_eq!(err.to_string(), format!("image: {reason}: {source}"));
        assert!(
            source.downcast_ref::<ImageError>().is_some()
                || source.downcast_ref::<std::io::Error>().is_some(),
            "the source is the decoder's error: {source:?}"
        );
        Ok(())
    }

    #[test]
    fn opaque_composite_is_identity_and_transparent_is_white() {
        for c in 0..=255u8 {
            assert_eq!(over_white(c, 255), c);
            assert_eq!(over_white(c, 0), 255);
        }
        // Values from Pillow: alpha_composite(white, (0, 100, 200, 128)).
        assert_eq!(
            [
                over_white(0, 128),
                over_white(100, 128),
                over_white(200, 128)
            ],
            [127, 177, 227]
        );
    }
}
