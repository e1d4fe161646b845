//! A key/value cache that grows on demand and can be cut back to any prefix.
//!
//! Each layer keeps one buffer for keys and one for values, shaped
//! `(1, kv_heads, capacity, head_dim)`. Appending writes in place; when the capacity is
//! exhausted the buffer is reallocated an eighth larger than needed (amortised O(1) per
//! position), so nothing is preallocated from the model's maximum context. Not double: a
//! turn arrives as a few long runs (system, screen, task) and then a move's few dozen
//! tokens, and doubling on the last run left up to twice the turn's KV resident (2B
//! shape, a 2,746-token turn: capacity 5,000 positions, 0.5 GB more than the turn needs).
//! Truncating only moves the length: the next append overwrites the old positions.
//! A feed that arrives in chunks announces its whole length first ([`KvCache::expect`]),
//! so the buffers grow once for it rather than once per chunk.

use candle_core::{DType, Device, Tensor};

use crate::error::{Error, Result};

/// The first allocation, in positions: enough for a short prompt without regrowing.
pub const INITIAL_CAPACITY: usize = 256;

/// One layer's keys and values.
#[derive(Debug, Clone, Default)]
struct LayerCache {
    /// `(keys, values)` buffers, `None` before the first append.
    buffers: Option<(Tensor, Tensor)>,
}

/// A per-layer K/V cache with a shared length.
#[derive(Debug, Clone)]
pub struct KvCache {
    layers: Vec<LayerCache>,
    len: usize,
    capacity: usize,
    /// Positions the appends under way will reach ([`expect`](Self::expect)); growth
    /// makes room for them at once.
    expected: usize,
}

impl KvCache {
    /// An empty cache for `n_layers` layers. Allocates nothing.
    pub fn new(n_layers: usize) -> Self {
        KvCache {
            layers: vec![LayerCache::default(); n_layers],
            len: 0,
            capacity: 0,
            expected: 0,
        }
    }

    /// Positions currently held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no position is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Positions the buffers hold before the next reallocation.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Cut back to the first `len` positions. O(1): the buffers are kept.
    pub fn truncate(&mut self, len: usize) -> Result<()> {
        if len > self.len {
            return Err(Error::invalid_input(format!(
                "cannot truncate the KV cache to {len} positions: it holds {}",
                self.len
            )));
        }
        self.len = len;
        Ok(())
    }

    /// The appends that follow will reach `len` positions in all (a prefill fed in
    /// chunks): a buffer that must grow grows to hold them all, instead of once per
    /// chunk, each growth copying what the buffer held. `0` forgets the expectation.
    pub fn expect(&mut self, len: usize) {
        self.expected = len;
    }

    /// Forget everything and free the buffers.
    pub fn clear(&mut self) {
        for l in &mut self.layers {
            l.buffers = None;
        }
        self.len = 0;
        self.capacity = 0;
    }

    /// Append `k` and `v` (`(1, kv_heads, n, head_dim)`) to layer `layer` at the current
    /// length and return the layer's keys and values for positions `0..len + n`.
    ///
    /// Every layer must be appended the same `n` before [`commit`](Self::commit) moves
    /// the shared length.
    pub fn append(&mut self, layer: usize, k: &Tensor, v: &Tensor) -> Result<(Tensor, Tensor)> {
        let (_, kv_heads, n, head_dim) = k.dims4()?;
        let needed = self.len + n;
        let capacity = self.capacity;
        let len = self.len;
        let expected = self.expected;
        let entry = self
            .layers
            .get_mut(layer)
            .ok_or_else(|| Error::internal(format!("KV cache has no layer {layer}")))?;
        let grow = |old: Option<&Tensor>,
                    dtype: DType,
                    device: &Device,
                    new_cap: usize|
         -> Result<Tensor> {
            let fresh = Tensor::zeros((1, kv_heads, new_cap, head_dim), dtype, device)?;
            if let Some(old) = old {
                if len > 0 {
                    fresh.slice_set(&old.narrow(2, 0, len)?.contiguous()?, 2, 0)?;
                }
            }
            Ok(fresh)
        };
        // A layer whose buffers are smaller than the shared capacity (the first append
        // after a growth decided by layer 0) grows now.
        let layer_cap = entry
            .buffers
            .as_ref()
            .map(|(kb, _)| kb.dim(2))
            .transpose()?
            .unwrap_or(0);
        let target_cap = if needed > capacity.max(layer_cap) {
            let needed = needed.max(expected);
            (needed + needed / 8).max(INITIAL_CAPACITY)
        } else {
            capacity.max(layer_cap)
        };
        if layer_cap < target_cap {
            let (ok, ov) = match &entry.buffers {
                Some((kb, vb)) => (Some(kb), Some(vb)),
                None => (None, None),
            };
            let kb = grow(ok, k.dtype(), k.device(), target_cap)?;
            let vb = grow(ov, v.dtype(), v.device(), target_cap)?;
            entry.buffers = Some((kb, vb));
        }
        let Some((kb, vb)) = &entry.buffers else {
            return Err(Error::internal("KV cache buffer missing after growth"));
        };
        kb.slice_set(&k.contiguous()?, 2, len)?;
        vb.slice_set(&v.contiguous()?, 2, len)?;
        if target_cap > self.capacity {
            self.capacity = target_cap;
        }
        Ok((kb.narrow(2, 0, needed)?, vb.narrow(2, 0, needed)?))
    }

    /// Move the shared length forward by `n` after every layer appended `n` positions.
    pub fn commit(&mut self, n: usize) {
        self.len += n;
    }

    /// The keys and values of the first `len` positions of every layer, copied out of the
    /// buffers: `(1, kv_heads, len, head_dim)` each.
    pub fn prefix(&self, len: usize) -> Result<Vec<(Tensor, Tensor)>> {
        if len == 0 || len > self.len {
            return Err(Error::invalid_input(format!(
                "a KV prefix of {len} positions from a cache of {}",
                self.len
            )));
        }
        self.layers
            .iter()
            .map(|l| {
                let (k, v) = l
                    .buffers
                    .as_ref()
                    .ok_or_else(|| Error::internal("KV cache layer without buffers"))?;
                Ok((
                    k.narrow(2, 0, len)?.contiguous()?,
                    v.narrow(2, 0, len)?.contiguous()?,
                ))
            })
            .collect()
    }

    /// Replaces the cache's content with `n_layers` layers, each `(keys, values)` of one
    /// shape `(1, kv_heads, n, head_dim)` given by `layer(i)` in order. On an error the cache
    /// is empty.
    pub fn restore(
        &mut self,
        n_layers: usize,
        mut layer: impl FnMut(usize) -> Result<(Tensor, Tensor)>,
    ) -> Result<()> {
        self.len = 0;
        if n_layers != self.layers.len() {
            return Err(Error::invalid_input(format!(
                "a KV prefix of {n_layers} layers for a model of {}",
                self.layers.len()
            )));
        }
        let mut shape = None;
        for i in 0..n_layers {
            let (k, v) = layer(i)?;
            let s = *shape.get_or_insert(k.dims4()?);
            if k.dims4()? != s || v.dims4()? != s {
                return Err(Error::invalid_input(
                    "the layers of a KV prefix differ in shape",
                ));
            }
            self.append(i, &k, &v)?;
        }
        self.commit(shape.map_or(0, |s| s.2));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_past_initial_capacity_and_keeps_contents() -> Result<()> {
        let dev = Device::Cpu;
        let mut cache = KvCache::new(2);
        let n = INITIAL_CAPACITY + 7;
        let k = Tensor::arange(0f32, (2 * n * 4) as f32, &dev)?.reshape((1, 2, n, 4))?;
        for layer in 0..2 {
            let (ks, vs) = cache.append(layer, &k, &k)?;
            assert_eq!(ks.dims(), &[1, 2, n, 4]);
            let diff = (ks - &k)?.abs()?.max_all()?.to_scalar::<f32>()?;
            assert_eq!(diff, 0.0);
            assert_eq!(vs.dims(), &[1, 2, n, 4]);
        }
        cache.commit(n);
        assert!(cache.capacity() >= n);
        // Truncate and append: the prefix stays, the tail is overwritten.
        cache.truncate(3)?;
        let one = Tensor::full(-1f32, (1, 2, 1, 4), &dev)?;
        let (ks, _) = cache.append(0, &one, &one)?;
        assert_eq!(ks.dims(), &[1, 2, 4, 4]);
        let head = ks.narrow(2, 0, 3)?;
        let expected = k.narrow(2, 0, 3)?;
        let diff = (head - expected)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert_eq!(diff, 0.0);
        let last = ks.narrow(2, 3, 1)?.flatten_all()?.to_vec1::<f32>()?;
        assert!(last.iter().all(|&x| x == -1.0));
        Ok(())
    }

    /// A turn's shape (long runs, then one token at a time) never holds much more than it
    /// uses: at most an eighth over the length after each growth (doubling held up to
    /// twice), and positions written before a growth are read back after it.
    #[test]
    fn capacity_stays_within_an_eighth_of_the_length_over_a_turn() -> Result<()> {
        let dev = Device::Cpu;
        let mut cache = KvCache::new(1);
        let run = |n: usize, at: usize| -> Result<Tensor> {
            let start = at as f32;
            Ok(Tensor::arange(start, start + n as f32, &dev)?.reshape((1, 1, n, 1))?)
        };
        let mut steps = vec![1_100, 1_400, 190];
        steps.extend(std::iter::repeat_n(1, 400));
        for n in steps {
            let len = cache.len();
            let kv = run(n, len)?;
            cache.append(0, &kv, &kv)?;
            cache.commit(n);
            let len = cache.len();
            assert!(
                cache.capacity() <= (len + len / 8).max(INITIAL_CAPACITY),
                "capacity {} for {len} positions",
                cache.capacity()
            );
        }
        let len = cache.len();
        let (ks, _) = cache.append(0, &run(1, len)?, &run(1, len)?)?;
        let all = ks.flatten_all()?.to_vec1::<f32>()?;
        assert!(all.iter().enumerate().all(|(i, &x)| x == i as f32));
        Ok(())
    }

    /// A feed announced whole grows the buffers once, to an eighth over the whole, and
    /// its chunks land where one append would have put them.
    #[test]
    fn an_expected_feed_grows_once_for_all_its_chunks() -> Result<()> {
        let dev = Device::Cpu;
        let mut cache = KvCache::new(1);
        let total = 3 * 500 + 77;
        cache.expect(total);
        let mut capacities = Vec::new();
        for n in [500, 500, 500, 77] {
            let at = cache.len() as f32;
            let kv = Tensor::arange(at, at + n as f32, &dev)?.reshape((1, 1, n, 1))?;
            cache.append(0, &kv, &kv)?;
            cache.commit(n);
            capacities.push(cache.capacity());
        }
        cache.expect(0);
        assert_eq!(capacities, vec![total + total / 8; 4]);
        let (ks, _) = cache.append(
            0,
            &Tensor::zeros((1, 1, 1, 1), DType::F32, &dev)?,
            &Tensor::zeros((1, 1, 1, 1), DType::F32, &dev)?,
        )?;
        let all = ks.flatten_all()?.to_vec1::<f32>()?;
        assert!(all[..total].iter().enumerate().all(|(i, &x)| x == i as f32));
        Ok(())
    }

    #[test]
    fn truncate_past_length_is_an_error() {
        let mut cache = KvCache::new(1);
        assert!(cache.truncate(1).is_err());
        assert!(cache.truncate(0).is_ok());
    }
}
