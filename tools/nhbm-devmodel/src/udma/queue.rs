//! One UDMA queue of one direction: its registers and its descriptor ring
//! (`udma_main.c` `udma_q_init_internal`, 428-470; the ring-id rules of
//! udma.h:375-388).

use super::desc::{INITIAL_RING_ID, RING_IDS, SIZE};
use super::regs::{q, ring};

/// Why a queue stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Its ring breaks the reference's rules (base or end not 256-byte
    /// aligned, a length outside 32 to 2^24 - 16 or not a multiple of 16),
    /// or a doorbell posted more descriptors than it holds.
    Ring,
    /// A descriptor or a buffer lies outside every mapped region of guest
    /// memory, or outside HBM.
    Address,
    /// A descriptor's ring id is not the phase the queue expects: software
    /// posted a slot it did not write.
    Phase,
    /// An S2M buffer smaller than the M2S descriptor's data.
    Length,
}

/// A ring's place: base address and length in descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ring {
    /// DMA address of descriptor 0.
    pub base: u64,
    /// Descriptors.
    pub len: u32,
}

/// A queue's registers and the engine's place in its ring.
#[derive(Clone, Debug)]
pub struct Queue {
    cfg: u32,
    base_lo: u32,
    base_hi: u32,
    drl: u32,
    head: u32,
    head_ring_id: u32,
    tail: u32,
    tail_ring_id: u32,
    pending: u32,
    fault: Option<Fault>,
    /// Bumped whenever what is in flight must be dropped (a queue reset).
    generation: u64,
}

impl Default for Queue {
    fn default() -> Self {
        Queue {
            cfg: q::CFG_RESET,
            base_lo: 0,
            base_hi: 0,
            drl: 0,
            head: 0,
            head_ring_id: INITIAL_RING_ID,
            tail: 0,
            tail_ring_id: INITIAL_RING_ID,
            pending: 0,
            fault: None,
            generation: 0,
        }
    }
}

impl Queue {
    /// Reads register `reg` of the queue block; `None` for one the model
    /// keeps as plain storage.
    pub fn read(&self, reg: u64) -> Option<u32> {
        Some(match reg {
            q::CFG => self.cfg,
            q::STATUS => u32::from(self.fault.is_some()) * q::STATUS_ERROR,
            q::DRBP_LOW => self.base_lo,
            q::DRBP_HIGH => self.base_hi,
            q::DRL => self.drl,
            q::DRHP => self.head | self.head_ring_id << q::RING_ID_SHIFT,
            q::DRTP => self.tail | self.tail_ring_id << q::RING_ID_SHIFT,
            q::DRTP_INC => 0,
            _ => return None,
        })
    }

    /// Writes register `reg` (`sw_ctrl` is this half's `q_sw_ctrl`);
    /// `None` for one the model keeps as plain storage, `Some(true)` when
    /// the write may give the engine work.
    pub fn write(&mut self, reg: u64, value: u32, sw_ctrl: u64) -> Option<bool> {
        match reg {
            q::CFG => self.cfg = value,
            q::DRBP_LOW => self.base_lo = value,
            q::DRBP_HIGH => self.base_hi = value,
            q::DRL => self.drl = value & q::OFFSET_MASK,
            q::DRTP_INC => self.post(value & q::OFFSET_MASK),
            r if r == sw_ctrl && value & q::SW_CTRL_RST_Q != 0 => self.reset_pointers(),
            q::STATUS | q::DRHP | q::DRTP => {}
            _ => return None,
        }
        Some(reg == q::CFG || reg == q::DRTP_INC)
    }

    /// `RST_Q`: head, tail and phases back to the start, the fault
    /// cleared, whatever was in flight dropped; the ring registers and
    /// `cfg` stay (the driver pauses the queue before and sets the ring
    /// after, udma_main.c:406-423, 463-469).
    fn reset_pointers(&mut self) {
        let generation = self.generation + 1;
        *self = Queue {
            cfg: self.cfg,
            base_lo: self.base_lo,
            base_hi: self.base_hi,
            drl: self.drl,
            generation,
            ..Queue::default()
        };
    }

    /// Back to the state after a device reset: everything in flight dropped.
    pub fn reset(&mut self) {
        let generation = self.generation + 1;
        *self = Queue {
            generation,
            ..Queue::default()
        };
    }

    /// A doorbell of `n` descriptors.
    fn post(&mut self, n: u32) {
        let Ok(ring) = self.ring() else {
            self.fault = Some(Fault::Ring);
            return;
        };
        if self.pending + n > ring.len {
            self.fault = Some(Fault::Ring);
            return;
        }
        self.pending += n;
        let tail = self.tail + n;
        self.tail_ring_id = (self.tail_ring_id + tail / ring.len) % RING_IDS;
        self.tail = tail % ring.len;
    }

    /// The ring as the registers place it, checked against the reference's
    /// rules.
    pub fn ring(&self) -> Result<Ring, Fault> {
        let base = u64::from(self.base_hi) << 32 | u64::from(self.base_lo & !0x3f);
        let len = self.drl;
        let end = base.checked_add(u64::from(len) * SIZE as u64);
        let ok = (ring::MIN..=ring::MAX).contains(&len)
            && len % ring::MULTIPLE == 0
            && base % ring::ALIGN == 0
            && end.is_some_and(|e| e % ring::ALIGN == 0);
        if ok {
            Ok(Ring { base, len })
        } else {
            Err(Fault::Ring)
        }
    }

    /// Whether the engine may fetch from the queue: enabled, not stopped,
    /// something posted.
    pub fn ready(&self) -> bool {
        self.cfg & q::CFG_ENABLE == q::CFG_ENABLE && self.fault.is_none() && self.pending > 0
    }

    /// Descriptors posted and not done.
    pub fn pending(&self) -> u32 {
        self.pending
    }

    /// DMA address of the descriptor at the head, and the phase it must carry.
    pub fn head_desc(&self) -> Result<(u64, u32), Fault> {
        let ring = self.ring()?;
        Ok((
            ring.base + u64::from(self.head) * SIZE as u64,
            self.head_ring_id,
        ))
    }

    /// The head descriptor is done: one step on, a new phase at the wrap.
    pub fn advance(&mut self) {
        let len = self.drl.max(1);
        self.pending -= 1;
        self.head += 1;
        if self.head == len {
            self.head = 0;
            self.head_ring_id = (self.head_ring_id + 1) % RING_IDS;
        }
    }

    /// Stops the queue on `fault`.
    pub fn stop(&mut self, fault: Fault) {
        self.fault = Some(fault);
    }

    /// Why the queue stopped, if it did.
    pub fn fault(&self) -> Option<Fault> {
        self.fault
    }

    /// Which life of the queue this is: an in-flight descriptor of an
    /// older one is dropped.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(base: u64, len: u32) -> Queue {
        let mut q = Queue::default();
        q.write(q::DRBP_LOW, base as u32, q::M2S_SW_CTRL);
        q.write(q::DRBP_HIGH, (base >> 32) as u32, q::M2S_SW_CTRL);
        q.write(q::DRL, len, q::M2S_SW_CTRL);
        q.write(q::CFG, q::CFG_ENABLE, q::M2S_SW_CTRL);
        q
    }

    #[test]
    fn the_phase_advances_at_each_wrap() {
        let mut q = queue(1 << 44 | 0x10_0000, 32);
        for pass in 0..5u32 {
            q.write(q::DRTP_INC, 32, q::M2S_SW_CTRL);
            for i in 0..32 {
                let (addr, phase) = q.head_desc().unwrap();
                assert_eq!(addr, (1 << 44 | 0x10_0000) + i * 16);
                assert_eq!(phase, (1 + pass) % 4);
                q.advance();
            }
        }
        assert!(!q.ready());
        assert_eq!(q.read(q::DRHP), Some(2 << 30), "head 0, phase 6 mod 4");
        q.write(q::DRTP_INC, 3, q::M2S_SW_CTRL);
        assert_eq!(q.read(q::DRTP), Some(3 | 2 << 30));
        q.write(q::M2S_SW_CTRL, q::SW_CTRL_RST_Q, q::M2S_SW_CTRL);
        assert_eq!(q.read(q::DRTP), Some(1 << 30));
        assert_eq!(q.generation(), 1);
        assert!(!q.ready());
    }

    #[test]
    fn rings_outside_the_references_rules_stop_the_queue() {
        for (base, len) in [(0x80, 32), (0x100, 16), (0x100, 40), (0x100, 1 << 24)] {
            let mut q = queue(base, len);
            q.write(q::DRTP_INC, 1, q::M2S_SW_CTRL);
            assert_eq!(q.fault(), Some(Fault::Ring), "{base:#x} x {len}");
            assert_eq!(q.read(q::STATUS), Some(q::STATUS_ERROR));
        }
        let mut q = queue(0x100, 32);
        q.write(q::DRTP_INC, 33, q::M2S_SW_CTRL);
        assert_eq!(q.fault(), Some(Fault::Ring), "more than the ring holds");
        // An M2S queue's `q_sw_ctrl` is not at the S2M offset.
        assert_eq!(
            q.write(q::S2M_SW_CTRL, q::SW_CTRL_RST_Q, q::M2S_SW_CTRL),
            None
        );
        assert_eq!(q.fault(), Some(Fault::Ring));
        q.write(q::M2S_SW_CTRL, q::SW_CTRL_RST_Q, q::M2S_SW_CTRL);
        assert_eq!(q.fault(), None);
        q.write(q::DRTP_INC, 32, q::M2S_SW_CTRL);
        assert!(q.ready());
        q.write(q::CFG, q::CFG_RESET, q::M2S_SW_CTRL);
        assert!(!q.ready(), "paused");
    }
}
