//! The framing the engine's own blobs share (a checkpoint, a run's validation answers): magic
//! bytes naming the format, the header's length as a little-endian `u32`, the header (JSON), then
//! the payload to the end. One writer and one reader, so the formats cannot drift apart.

/// Why bytes are not a frame of the expected format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unframed {
    /// They do not start with the format's magic bytes.
    WrongMagic,
    /// They end before the header's length.
    NoLength,
    /// They end inside the header.
    ShortHeader,
}

/// `magic`, the header's length and `header`, with room for `payload` more bytes (the caller
/// appends the payload); `None` when the header is larger than 4 GiB.
pub(crate) fn frame(magic: &[u8], header: &[u8], payload: usize) -> Option<Vec<u8>> {
    let length = u32::try_from(header.len()).ok()?;
    let mut bytes = Vec::with_capacity(magic.len() + 4 + header.len() + payload);
    bytes.extend_from_slice(magic);
    bytes.extend_from_slice(&length.to_le_bytes());
    bytes.extend_from_slice(header);
    Some(bytes)
}

/// The header and the payload of a frame written by [`frame`] with `magic`.
pub(crate) fn unframe<'a>(bytes: &'a [u8], magic: &[u8]) -> Result<(&'a [u8], &'a [u8]), Unframed> {
    let rest = bytes.strip_prefix(magic).ok_or(Unframed::WrongMagic)?;
    let (length, rest) = rest.split_first_chunk::<4>().ok_or(Unframed::NoLength)?;
    let length = u32::from_le_bytes(*length) as usize;
    if rest.len() < length {
        return Err(Unframed::ShortHeader);
    }
    Ok(rest.split_at(length))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_reads_back_and_every_cut_is_named() {
        let mut bytes = frame(b"EMX\n", b"{\"a\":1}", 3).unwrap();
        bytes.extend_from_slice(b"xyz");
        assert_eq!(
            unframe(&bytes, b"EMX\n"),
            Ok((b"{\"a\":1}".as_slice(), b"xyz".as_slice()))
        );
        assert_eq!(unframe(&bytes, b"EMY\n"), Err(Unframed::WrongMagic));
        assert_eq!(unframe(&bytes[..6], b"EMX\n"), Err(Unframed::NoLength));
        assert_eq!(unframe(&bytes[..10], b"EMX\n"), Err(Unframed::ShortHeader));
    }
}
