//! The bookkeeping of a paged KV cache's blocks, apart from their contents: reference counts,
//! the content addresses of full blocks (vLLM's automatic prefix caching), the blocks no
//! sequence holds but that stay cached for later prompts, least recently used first, and the
//! free list. Everything is allocated when the pool is made (an address table of twice the
//! blocks, the LRU order as a list threaded through the blocks): registering, caching and
//! evicting blocks never allocates, so a decode allocates nothing per token.
//!
//! A full block is addressed by the hash chain of its tokens: `hash(parent, tokens)`, where
//! `parent` is the address of the block before it in its sequence (0 for the first). Two
//! sequences whose first `k` blocks hold the same tokens therefore have the same `k`
//! addresses, and since a block's keys and values depend only on the tokens up to its end (and
//! the kernels are batch invariant), one copy serves both. A lookup also compares the parent
//! address and the tokens stored with the block, so only a 64-bit collision of the parent
//! chain could alias two prefixes.

use alloc::vec;
use alloc::vec::Vec;

use crate::ops::attention::BLOCK;

/// The content address of a full block whose predecessor has address `parent`.
pub fn chain_hash(parent: u64, tokens: &[u32]) -> u64 {
    // splitmix64's finalizer over the parent and each token
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut h = mix(parent ^ 0x9e37_79b9_7f4a_7c15);
    for &t in tokens {
        h = mix(h.wrapping_add(t as u64).wrapping_add(0x9e37_79b9_7f4a_7c15));
    }
    // 0 stands for "no parent"
    h | 1
}

/// Where a block is: held by sequences, cached (no holder, findable by its address), or free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Use {
    Held(u32),
    /// Unreferenced but findable, in the LRU list.
    Cached,
    Free,
}

/// No block (the end of the LRU list).
const NIL: u32 = u32::MAX;

pub struct Blocks {
    state: Vec<Use>,
    /// Address of each registered block (0: not registered).
    address: Vec<u64>,
    /// Address of the block before it.
    parent: Vec<u64>,
    /// The tokens of each registered block, `BLOCK` per block.
    tokens: Vec<u32>,
    by_address: AddressTable,
    /// Cached blocks by the time they were released, oldest first: a list threaded through
    /// `prev` / `next`, from `oldest` to `newest`.
    prev: Vec<u32>,
    next: Vec<u32>,
    oldest: u32,
    newest: u32,
    n_cached: usize,
    free: Vec<u32>,
}

impl Blocks {
    pub fn new(n: usize) -> Blocks {
        Blocks {
            state: vec![Use::Free; n],
            address: vec![0; n],
            parent: vec![0; n],
            tokens: vec![0; n * BLOCK],
            by_address: AddressTable::new(n),
            prev: vec![NIL; n],
            next: vec![NIL; n],
            oldest: NIL,
            newest: NIL,
            n_cached: 0,
            // popped from the end: block 0 first
            free: (0..n as u32).rev().collect(),
        }
    }

    /// Appends `b` to the LRU list (the most recently released).
    fn push_newest(&mut self, b: u32) {
        self.prev[b as usize] = self.newest;
        self.next[b as usize] = NIL;
        match self.newest {
            NIL => self.oldest = b,
            n => self.next[n as usize] = b,
        }
        self.newest = b;
        self.n_cached += 1;
    }

    /// Takes `b` out of the LRU list.
    fn unlink(&mut self, b: u32) {
        let (p, n) = (self.prev[b as usize], self.next[b as usize]);
        match p {
            NIL => self.oldest = n,
            p => self.next[p as usize] = n,
        }
        match n {
            NIL => self.newest = p,
            n => self.prev[n as usize] = p,
        }
        self.n_cached -= 1;
    }

    pub fn len(&self) -> usize {
        self.state.len()
    }

    pub fn is_empty(&self) -> bool {
        self.state.is_empty()
    }

    /// Blocks that can be handed out now: free ones and cached ones (evicted oldest first).
    pub fn available(&self) -> usize {
        self.free.len() + self.n_cached
    }

    /// Blocks no sequence holds that keep their contents for later prompts.
    pub fn cached(&self) -> usize {
        self.n_cached
    }

    /// Blocks held by at least one sequence.
    pub fn held(&self) -> usize {
        self.len() - self.available()
    }

    /// Holders of block `b`.
    pub fn refs(&self, b: u32) -> u32 {
        match self.state[b as usize] {
            Use::Held(n) => n,
            _ => 0,
        }
    }

    /// Whether `b` is registered under a content address (so must not be written).
    pub fn is_registered(&self, b: u32) -> bool {
        self.address[b as usize] != 0
    }

    /// The content address of `b` (0 when not registered).
    pub fn address(&self, b: u32) -> u64 {
        self.address[b as usize]
    }

    /// A block for one holder: a free one, else the least recently used cached one (whose
    /// address is forgotten). `None` when every block is held.
    pub fn alloc(&mut self) -> Option<u32> {
        let b = match self.free.pop() {
            Some(b) => b,
            None => {
                let b = self.oldest;
                if b == NIL {
                    return None;
                }
                self.unlink(b);
                self.unregister(b);
                b
            }
        };
        self.state[b as usize] = Use::Held(1);
        Some(b)
    }

    /// One more holder of `b` (a cached block becomes held again).
    pub fn retain(&mut self, b: u32) {
        let s = self.state[b as usize];
        self.state[b as usize] = match s {
            Use::Held(n) => Use::Held(n + 1),
            Use::Cached => {
                self.unlink(b);
                Use::Held(1)
            }
            Use::Free => panic!("block {b} retained while free"),
        };
    }

    /// One holder fewer; a block nobody holds stays cached when it has an address, else it
    /// is free.
    pub fn release(&mut self, b: u32) {
        let s = self.state[b as usize];
        self.state[b as usize] = match s {
            Use::Held(n) if n > 1 => Use::Held(n - 1),
            Use::Held(_) if self.address[b as usize] != 0 => {
                self.push_newest(b);
                Use::Cached
            }
            Use::Held(_) => {
                self.free.push(b);
                Use::Free
            }
            other => panic!("block {b} released while {other:?}"),
        };
    }

    /// Registers the held, full block `b` holding `tokens` after the block of address
    /// `parent`. Returns its address and the block already registered under it, if another
    /// block holds the same content (the caller may switch to that one).
    pub fn register(&mut self, b: u32, parent: u64, tokens: &[u32]) -> (u64, Option<u32>) {
        debug_assert_eq!(tokens.len(), BLOCK);
        let address = chain_hash(parent, tokens);
        if let Some(other) = self.by_address.get(address) {
            if other != b && self.matches(other, parent, tokens) {
                return (address, Some(other));
            }
            if other == b {
                return (address, None);
            }
            // a collision with different content: leave the first one registered
            return (address, None);
        }
        self.unregister(b);
        self.by_address.insert(address, b);
        self.address[b as usize] = address;
        self.parent[b as usize] = parent;
        self.tokens[b as usize * BLOCK..][..BLOCK].copy_from_slice(tokens);
        (address, None)
    }

    /// The registered block holding `tokens` after the block of address `parent`.
    pub fn lookup(&self, parent: u64, tokens: &[u32]) -> Option<(u64, u32)> {
        let address = chain_hash(parent, tokens);
        let b = self.by_address.get(address)?;
        self.matches(b, parent, tokens).then_some((address, b))
    }

    fn matches(&self, b: u32, parent: u64, tokens: &[u32]) -> bool {
        self.parent[b as usize] == parent && self.tokens[b as usize * BLOCK..][..BLOCK] == *tokens
    }

    /// Forgets `b`'s address (its contents are about to change).
    pub fn unregister(&mut self, b: u32) {
        let a = core::mem::take(&mut self.address[b as usize]);
        if a != 0 && self.by_address.get(a) == Some(b) {
            self.by_address.remove(a);
        }
    }
}

/// Content addresses (never 0) to blocks: open addressing with linear probing in a table of
/// at least twice the blocks (so at most half full: each block is registered under one
/// address at most), removals shifting the entries after them back (no tombstones).
struct AddressTable {
    slots: Vec<(u64, u32)>,
    mask: usize,
}

impl AddressTable {
    fn new(blocks: usize) -> AddressTable {
        let n = (2 * blocks).next_power_of_two().max(2);
        AddressTable {
            slots: vec![(0, 0); n],
            mask: n - 1,
        }
    }

    fn home(&self, a: u64) -> usize {
        // the addresses are hashes already: fold the high half into the low bits
        ((a ^ (a >> 32)) as usize) & self.mask
    }

    /// The slot holding `a`, or the empty one where it would go.
    fn find(&self, a: u64) -> usize {
        let mut i = self.home(a);
        while self.slots[i].0 != 0 && self.slots[i].0 != a {
            i = (i + 1) & self.mask;
        }
        i
    }

    fn get(&self, a: u64) -> Option<u32> {
        let (k, b) = self.slots[self.find(a)];
        (k != 0).then_some(b)
    }

    fn insert(&mut self, a: u64, b: u32) {
        debug_assert_ne!(a, 0);
        let i = self.find(a);
        self.slots[i] = (a, b);
    }

    fn remove(&mut self, a: u64) {
        let mut hole = self.find(a);
        if self.slots[hole].0 == 0 {
            return;
        }
        // shift back each entry after the hole whose probe from its home passes the hole
        let dist = |from: usize, to: usize| to.wrapping_sub(from) & self.mask;
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let (k, _) = self.slots[j];
            if k == 0 {
                break;
            }
            if dist(self.home(k), j) >= dist(hole, j) {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        self.slots[hole] = (0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(x: u32) -> Vec<u32> {
        (0..BLOCK as u32).map(|i| i * 7 + x).collect()
    }

    #[test]
    fn lru_eviction_and_reuse() {
        let mut b = Blocks::new(3);
        let (x, y, z) = (b.alloc().unwrap(), b.alloc().unwrap(), b.alloc().unwrap());
        assert_eq!((x, y, z), (0, 1, 2));
        assert_eq!(b.alloc(), None);
        let (ax, _) = b.register(x, 0, &toks(1));
        let (ay, _) = b.register(y, ax, &toks(2));
        // released tail first: y is older than x in the LRU
        b.release(y);
        b.release(x);
        b.release(z);
        assert_eq!((b.available(), b.cached(), b.held()), (3, 2, 0));
        // the free one goes first, then the least recently released cached one (y)
        assert_eq!(b.alloc(), Some(2));
        assert_eq!(b.lookup(ax, &toks(2)), Some((ay, 1)));
        assert_eq!(b.alloc(), Some(1));
        assert_eq!(b.lookup(ax, &toks(2)), None, "evicted blocks are forgotten");
        // x is still findable and comes back held
        assert_eq!(b.lookup(0, &toks(1)), Some((ax, 0)));
        b.retain(0);
        assert_eq!((b.refs(0), b.available()), (1, 0));
        b.retain(0);
        b.release(0);
        assert_eq!(b.refs(0), 1);
    }

    #[test]
    fn lookup_checks_parent_and_tokens() {
        let mut b = Blocks::new(4);
        let x = b.alloc().unwrap();
        let (ax, _) = b.register(x, 0, &toks(1));
        assert!(b.lookup(5, &toks(1)).is_none());
        assert!(b.lookup(0, &toks(2)).is_none());
        // the same content registered twice: the second learns about the first
        let y = b.alloc().unwrap();
        assert_eq!(b.register(y, 0, &toks(1)), (ax, Some(x)));
        assert!(!b.is_registered(y));
        assert_ne!(chain_hash(0, &toks(1)), chain_hash(ax, &toks(1)));
    }

    #[test]
    fn the_address_table_survives_collisions_and_removals() {
        // addresses that share their home slot, removed in every order
        let mut t = AddressTable::new(8);
        let same_home: Vec<u64> = (1..=6u64).map(|k| (k << 40) | 1).collect();
        let homes: Vec<usize> = same_home.iter().map(|&a| t.home(a)).collect();
        assert!(homes.windows(2).all(|w| w[0] == w[1]), "{homes:?}");
        for (i, &a) in same_home.iter().enumerate() {
            t.insert(a, i as u32);
        }
        for skip in 0..same_home.len() {
            let mut t2 = AddressTable::new(8);
            for (i, &a) in same_home.iter().enumerate() {
                t2.insert(a, i as u32);
            }
            t2.remove(same_home[skip]);
            for (i, &a) in same_home.iter().enumerate() {
                let want = (i != skip).then_some(i as u32);
                assert_eq!(t2.get(a), want, "removed {skip}, looked up {i}");
            }
        }
        // a random mix against a reference map
        let mut reference = alloc::collections::BTreeMap::new();
        let mut t = AddressTable::new(64);
        let mut x = 0x1234_5678_9abc_def1u64;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let a = (x % 97) << 33 | (x % 5) | 1;
            if step % 3 == 0 || reference.len() >= 64 {
                t.remove(a);
                reference.remove(&a);
            } else {
                t.insert(a, step);
                reference.insert(a, step);
            }
            if step % 101 == 0 {
                for (&a, &b) in &reference {
                    assert_eq!(t.get(a), Some(b));
                }
            }
        }
    }
}
