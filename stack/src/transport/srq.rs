//! Shared receive queues (IBA 10.2.9, 11.2.3; rxe_srq.c): one pool of receive work requests
//! that several queue pairs draw from, with a limit that raises an event once when the pool
//! runs low.

use std::collections::VecDeque;

use super::config::Event;
use super::mr::PdId;
use super::wr::RecvWr;

/// Names a shared receive queue of one engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SrqId(pub u32);

/// Creation parameters (`ibv_srq_init_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrqInit {
    /// Its protection domain.
    pub pd: PdId,
    /// Receive work requests it holds at most.
    pub max_wr: u32,
    /// Scatter/gather entries per receive at most.
    pub max_sge: u32,
    /// Armed when non-zero: [`Event::SrqLimitReached`] once fewer than this many are left.
    pub limit: u32,
}

impl SrqInit {
    /// `max_wr` receives of one scatter/gather entry each, no limit armed.
    pub fn new(pd: PdId, max_wr: u32) -> SrqInit {
        SrqInit {
            pd,
            max_wr,
            max_sge: 1,
            limit: 0,
        }
    }
}

/// The attributes of a shared receive queue (`ibv_srq_attr` as `ibv_query_srq` returns it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrqAttrs {
    /// Receives the queue holds at most.
    pub max_wr: u32,
    /// Scatter/gather entries per receive at most.
    pub max_sge: u32,
    /// 0 when disarmed.
    pub limit: u32,
    /// Receives posted and not consumed yet.
    pub posted: u32,
}

/// Why a shared receive queue verb was refused (rxe's `rxe_srq_chk_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SrqError {
    /// `max_wr` is zero or too large.
    #[error("max_wr must be between 1 and {max}")]
    MaxWr {
        /// The largest allowed.
        max: u32,
    },
    /// `max_sge` is zero or too large.
    #[error("max_sge must be between 1 and {max}")]
    MaxSge {
        /// The largest allowed.
        max: usize,
    },
    /// The limit to arm is above `max_wr`.
    #[error("the limit {limit} exceeds max_wr {max_wr}")]
    Limit {
        /// The limit asked for.
        limit: u32,
        /// The queue's size.
        max_wr: u32,
    },
    /// The new size cannot hold what is posted, or is below the armed limit.
    #[error("max_wr {max_wr} is below the {posted} receives posted or the armed limit")]
    Shrink {
        /// The size asked for.
        max_wr: u32,
        /// Receives posted now.
        posted: u32,
    },
}

#[derive(Debug)]
pub(crate) struct Srq {
    pub pd: PdId,
    pub max_wr: u32,
    pub max_sge: u32,
    limit: u32,
    queue: VecDeque<RecvWr>,
    /// Queue pairs attached: it cannot be destroyed before them.
    pub users: u32,
}

impl Srq {
    pub fn new(init: &SrqInit, max_wr: u32, max_sge: usize) -> Result<Srq, SrqError> {
        if init.max_wr == 0 || init.max_wr > max_wr {
            return Err(SrqError::MaxWr { max: max_wr });
        }
        if init.max_sge == 0 || init.max_sge as usize > max_sge {
            return Err(SrqError::MaxSge { max: max_sge });
        }
        if init.limit > init.max_wr {
            return Err(SrqError::Limit {
                limit: init.limit,
                max_wr: init.max_wr,
            });
        }
        Ok(Srq {
            pd: init.pd,
            max_wr: init.max_wr,
            max_sge: init.max_sge,
            limit: init.limit,
            queue: VecDeque::new(),
            users: 0,
        })
    }

    pub fn attrs(&self) -> SrqAttrs {
        SrqAttrs {
            max_wr: self.max_wr,
            max_sge: self.max_sge,
            limit: self.limit,
            posted: self.queue.len() as u32,
        }
    }

    /// `ibv_modify_srq`: a new size (never below what is posted or the armed limit) and/or
    /// a limit to arm (0 disarms).
    pub fn modify(
        &mut self,
        max_wr: Option<u32>,
        limit: Option<u32>,
        device_max: u32,
    ) -> Result<(), SrqError> {
        let new_max = max_wr.unwrap_or(self.max_wr);
        let new_limit = limit.unwrap_or(self.limit);
        if new_max == 0 || new_max > device_max {
            return Err(SrqError::MaxWr { max: device_max });
        }
        if (new_max as usize) < self.queue.len() || new_max < new_limit {
            return Err(SrqError::Shrink {
                max_wr: new_max,
                posted: self.queue.len() as u32,
            });
        }
        self.max_wr = new_max;
        self.limit = new_limit;
        Ok(())
    }

    /// Room for one more receive.
    pub fn is_full(&self) -> bool {
        self.queue.len() >= self.max_wr as usize
    }

    pub fn push(&mut self, wr: RecvWr) {
        self.queue.push_back(wr);
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The next receive; when that leaves fewer than the armed limit, the limit event is
    /// raised and the limit disarmed (IBA 11.2.3.x, rxe's `get_srq_wqe`).
    pub fn pop(&mut self, id: SrqId, events: &mut VecDeque<Event>) -> Option<RecvWr> {
        let wr = self.queue.pop_front()?;
        if self.limit > 0 && (self.queue.len() as u32) < self.limit {
            self.limit = 0;
            events.push_back(Event::SrqLimitReached { srq: id });
        }
        Some(wr)
    }
}
