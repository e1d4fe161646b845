//! What the model's KV cache holds, so a turn feeds only what changed (ARCHITECTURE.md,
//! decision 8).
//!
//! A prompt is its token ids plus, for each run of image pads, the content hash of the image
//! behind it: two runs of pads are the same only when their images are (their ids are all
//! `<|image_pad|>`). [`CachedPrompt::common_prefix`] finds how much of a new prompt the cache
//! already holds; the caller cuts the cache back to that and feeds the rest. The system run
//! (the same every turn), the screen run (the same while the screenshot and the view are) and
//! for `verify_done` everything up to its question are reused this way, with no bookkeeping
//! per run.

/// A prompt as the cache sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CachedPrompt {
    /// The token ids, image pads included.
    pub tokens: Vec<u32>,
    /// Each image run: its first position, its length and its image's content hash.
    pub images: Vec<ImageRun>,
}

/// One run of image pads in a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageRun {
    /// Position of the first pad.
    pub start: usize,
    /// Number of pads.
    pub len: usize,
    /// Content hash of the image.
    pub hash: u64,
}

impl CachedPrompt {
    /// Appends text tokens.
    pub fn push_tokens(&mut self, ids: &[u32]) {
        self.tokens.extend_from_slice(ids);
    }

    /// Appends an image run of `pads` (the pad ids, already framed by the caller's
    /// `vision_start`/`vision_end` tokens pushed around it) for the image of `hash`.
    pub fn push_image(&mut self, pads: &[u32], hash: u64) {
        self.images.push(ImageRun {
            start: self.tokens.len(),
            len: pads.len(),
            hash,
        });
        self.tokens.extend_from_slice(pads);
    }

    /// The number of leading positions `other` shares with `self`: equal ids, and where
    /// either has an image run, the same image over the whole run. Never ends inside an
    /// image run (a run is fed whole or not at all).
    pub fn common_prefix(&self, other: &CachedPrompt) -> usize {
        let mut n = self
            .tokens
            .iter()
            .zip(&other.tokens)
            .take_while(|(a, b)| a == b)
            .count();
        // The first image run, in either prompt, that the prefix reaches into must be the
        // same image over the same positions; else the prefix ends where that run starts.
        for run in self.images.iter().chain(&other.images) {
            if run.start >= n {
                continue;
            }
            let same = self.images.contains(run) && other.images.contains(run);
            if !same || run.start + run.len > n {
                n = n.min(run.start);
            }
        }
        n
    }

    /// The image runs that start at or after `from`, in order.
    pub fn images_from(&self, from: usize) -> impl Iterator<Item = &ImageRun> {
        self.images.iter().filter(move |r| r.start >= from)
    }

    /// Number of positions.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether the prompt is empty.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAD: u32 = 9;

    fn prompt(before: &[u32], image: Option<(usize, u64)>, after: &[u32]) -> CachedPrompt {
        let mut p = CachedPrompt::default();
        p.push_tokens(before);
        if let Some((n, hash)) = image {
            p.push_tokens(&[7]);
            p.push_image(&vec![PAD; n], hash);
            p.push_tokens(&[8]);
        }
        p.push_tokens(after);
        p
    }

    #[test]
    fn the_same_screen_is_reused_up_to_the_task() {
        let a = prompt(&[1, 2, 3], Some((4, 11)), &[20, 21]);
        let b = prompt(&[1, 2, 3], Some((4, 11)), &[30, 31, 32]);
        assert_eq!(a.common_prefix(&b), 3 + 1 + 4 + 1);
    }

    #[test]
    fn another_image_behind_the_same_pads_is_not_reused() {
        let a = prompt(&[1, 2, 3], Some((4, 11)), &[20]);
        let b = prompt(&[1, 2, 3], Some((4, 12)), &[20]);
        // The system run and the vision-start token, not the pads.
        assert_eq!(a.common_prefix(&b), 4);
    }

    #[test]
    fn a_prefix_never_ends_inside_an_image_run() {
        let a = prompt(&[1], Some((4, 11)), &[]);
        let mut b = prompt(&[1], None, &[7, PAD, PAD]);
        b.images.clear();
        assert_eq!(a.common_prefix(&b), 2);
        assert_eq!(b.common_prefix(&a), 2);
    }

    #[test]
    fn a_text_only_prompt_shares_its_system_run() {
        let a = prompt(&[1, 2, 3], Some((4, 11)), &[20]);
        let b = prompt(&[1, 2, 3], None, &[5]);
        assert_eq!(a.common_prefix(&b), 3);
    }
}
