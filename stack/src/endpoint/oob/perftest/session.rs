//! The perftest dialogue as types: [`Session`] (connected) -> [`Negotiated`] (versions, system
//! data and MTU agreed) -> [`Connected`] (keys swapped; syncs, results and close).

use std::net::TcpStream;
use std::time::Duration;

use super::{BwReport, BwTest, DONE, IbMtu, Keys, SysData, VERSION, VERSION_LEN};
use super::{is_v4_mapped, parse_version, version_message};
use crate::endpoint::oob::error::{MalformedMessage, OobError};
use crate::endpoint::oob::net::Channel;

/// Which end of the TCP connection: it decides who writes first in every exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Was given the server's name; writes first.
    Client,
    /// Accepted the connection; reads first.
    Server,
}

/// A fresh connection to a perftest peer.
#[derive(Debug)]
pub struct Session {
    channel: Channel,
    role: Role,
}

/// What this side brings to the negotiation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiation {
    /// The buffer geometry (`check_sys_data`).
    pub sys: SysData,
    /// The port's active MTU, or the one asked for with `-m`.
    pub mtu: IbMtu,
}

/// What both sides use after the negotiation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agreed {
    /// The peer's perftest version string.
    pub peer_version: String,
    /// The larger of each side's values.
    pub sys: SysData,
    /// The smaller of the two MTUs.
    pub mtu: IbMtu,
}

/// Versions, system data and MTU are agreed; next come the keys.
#[derive(Debug)]
pub struct Negotiated {
    session: Session,
}

/// Keys are swapped; the QPs can be connected with [`Connected::peers`].
#[derive(Debug)]
pub struct Connected {
    session: Session,
    /// One per QP (`-q N`), in the order sent; never empty.
    local: Vec<Keys>,
    peer: Vec<Keys>,
}

impl Session {
    /// `timeout` bounds each read; `None` waits forever, as perftest does.
    pub fn new(stream: TcpStream, role: Role, timeout: Option<Duration>) -> Result<Self, OobError> {
        Ok(Session {
            channel: Channel::new(stream, timeout)?,
            role,
        })
    }

    /// Which end of the connection this side is.
    pub fn role(&self) -> Role {
        self.role
    }

    /// `ctx_xchg_data_ethernet`: [`Carrier::exchange`] over the TCP stream.
    fn exchange(
        &mut self,
        mine: &[u8],
        theirs: &mut [u8],
        step: &'static str,
    ) -> Result<(), OobError> {
        self.channel.exchange(self.role, mine, theirs, step)
    }

    /// `exchange_versions`, `check_version_compatibility`, `check_sys_data`, `check_mtu`.
    pub fn negotiate(mut self, local: &Negotiation) -> Result<(Negotiated, Agreed), OobError> {
        let agreed = negotiate_over(&mut |m, t, s| self.exchange(m, t, s), local)?;
        Ok((Negotiated { session: self }, agreed))
    }

    /// `ctx_hand_shake`: one key message each way, read in the form of our own keys.
    fn hand_shake(&mut self, local: &Keys, step: &'static str) -> Result<Keys, OobError> {
        let mine = local.to_message();
        let mut theirs = vec![0u8; mine.len()];
        self.exchange(&mine, &mut theirs, step)?;
        Ok(Keys::parse(&theirs, local.form())?)
    }
}

impl Negotiated {
    /// The first key handshake and `ctx_check_gid_compatibility`. Connect the QP (RTR, RTS)
    /// with the peer's keys next, then make [`BwTest::syncs_after_connect`] calls to
    /// [`Connected::sync`].
    pub fn exchange_keys(self, local: Keys) -> Result<Connected, OobError> {
        self.exchange_all_keys(vec![local])
    }

    /// `-q N`: one key handshake per QP, in order (perftest's `for (i = 0; i <
    /// num_of_qps; i++) ctx_hand_shake(&my_dest[i], &rem_dest[i])`), then the GID check of
    /// the first. Connect every QP with its peer's keys, then shake hands as
    /// [`Connected::sync`] and [`Connected::sync_each`] say.
    ///
    /// # Panics
    /// If `local` is empty.
    pub fn exchange_all_keys(mut self, local: Vec<Keys>) -> Result<Connected, OobError> {
        assert!(!local.is_empty(), "at least one QP");
        let mut peer = Vec::with_capacity(local.len());
        for keys in &local {
            peer.push(self.session.hand_shake(keys, "exchanging QP keys")?);
        }
        if let (Some(l), Some(r)) = (local[0].gid, peer[0].gid)
            && is_v4_mapped(&l) != is_v4_mapped(&r)
        {
            return Err(OobError::GidTypeMismatch {
                local: l,
                remote: r,
            });
        }
        Ok(Connected {
            session: self.session,
            local,
            peer,
        })
    }
}

impl Connected {
    /// The first QP's keys, which every barrier after the key rounds sends.
    pub fn local(&self) -> &Keys {
        &self.local[0]
    }

    /// The keys the peer sent.
    pub fn peer(&self) -> &Keys {
        &self.peer[0]
    }

    /// Every QP's keys, in the order exchanged.
    pub fn locals(&self) -> &[Keys] {
        &self.local
    }

    /// The peer's keys for each QP, in the same order.
    pub fn peers(&self) -> &[Keys] {
        &self.peer
    }

    /// Changes the read timeout, e.g. before the sync that waits out the peer's whole test.
    /// Keep one: a peer whose machine stops (an rxe guest powering off) may never close the
    /// connection, and only the timeout then ends the wait.
    pub fn set_timeout(&mut self, timeout: Option<Duration>) -> Result<(), OobError> {
        self.session.channel.set_timeout(timeout)
    }

    /// One more `ctx_hand_shake` of the first QP's keys: perftest's barrier. The peer must
    /// send its keys unchanged.
    pub fn sync(&mut self) -> Result<(), OobError> {
        self.sync_qp(0)
    }

    /// The round after connecting in which perftest prints the remote side: one handshake
    /// per QP, each QP's keys again.
    pub fn sync_each(&mut self) -> Result<(), OobError> {
        (0..self.local.len()).try_for_each(|i| self.sync_qp(i))
    }

    fn sync_qp(&mut self, i: usize) -> Result<(), OobError> {
        let again = self
            .session
            .hand_shake(&self.local[i], "synchronising with the peer")?;
        if again != self.peer[i] {
            return Err(OobError::KeysChanged {
                first: self.peer[i].to_string(),
                now: again.to_string(),
            });
        }
        Ok(())
    }

    /// `xchg_bw_reports`: five 8-byte exchanges. Returns the peer's report.
    pub fn exchange_reports(&mut self, mine: &BwReport) -> Result<BwReport, OobError> {
        exchange_reports_over(&mut |m, t, s| self.session.exchange(m, t, s), mine)
    }

    /// `ctx_close_connection`: a last sync, then `"done\0"`. perftest never reads the peer's
    /// `"done"`; we read it when it comes, so that our close does not reset the connection,
    /// and accept the peer hanging up first.
    pub fn close(mut self) -> Result<(), OobError> {
        self.sync()?;
        let step = "closing";
        self.session.channel.send(&DONE, step)?;
        let mut done = [0u8; DONE.len()];
        match self.session.channel.recv(&mut done, step) {
            Ok(()) if done == DONE => Ok(()),
            Ok(()) => Err(MalformedMessage::new(
                "done\\0",
                &done,
                "the peer's last message must be \"done\" and a NUL".into(),
            )
            .into()),
            Err(OobError::Closed { got: 0, .. }) => Ok(()),
            Err(OobError::Io { source, .. })
                if matches!(
                    source.kind(),
                    std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Everything after the test: for write, read and atomic a sync (the server waits here
    /// for the client's test to end), the results (returns the peer's) and the close; for
    /// send only the close (`mine` is not sent, and `None` is returned).
    pub fn finish(mut self, test: BwTest, mine: &BwReport) -> Result<Option<BwReport>, OobError> {
        let peer_report = if test.exchanges_reports() {
            self.sync()?;
            Some(self.exchange_reports(mine)?)
        } else {
            None
        };
        self.close()?;
        Ok(peer_report)
    }
}

/// What carries the dialogue's messages: the TCP stream, or `-R`'s rdma_cm connection (one
/// SEND per message).
pub trait Carrier {
    /// Sends `msg` whole.
    fn send(&mut self, msg: &[u8], step: &'static str) -> Result<(), OobError>;

    /// Fills `buf` with what the peer sent, exactly.
    fn recv(&mut self, buf: &mut [u8], step: &'static str) -> Result<(), OobError>;

    /// One exchange (`ctx_xchg_data_ethernet`, `ctx_xchg_data_rdma`): the client sends
    /// `mine` then receives `theirs`, the server the other way round.
    fn exchange(
        &mut self,
        role: Role,
        mine: &[u8],
        theirs: &mut [u8],
        step: &'static str,
    ) -> Result<(), OobError> {
        match role {
            Role::Client => {
                self.send(mine, step)?;
                self.recv(theirs, step)
            }
            Role::Server => {
                self.recv(theirs, step)?;
                self.send(mine, step)
            }
        }
    }
}

impl Carrier for Channel {
    fn send(&mut self, msg: &[u8], step: &'static str) -> Result<(), OobError> {
        Channel::send(self, msg, step)
    }

    fn recv(&mut self, buf: &mut [u8], step: &'static str) -> Result<(), OobError> {
        Channel::recv(self, buf, step)
    }
}

/// One exchange of the dialogue: our message out and the peer's of the same size in, in
/// the order of our role; over TCP, or over `-R`'s rdma_cm connection (one SEND each way).
pub type Exchange<'a> = dyn FnMut(&[u8], &mut [u8], &'static str) -> Result<(), OobError> + 'a;

fn exchange_array<const N: usize>(
    exchange: &mut Exchange<'_>,
    mine: [u8; N],
    step: &'static str,
) -> Result<[u8; N], OobError> {
    let mut theirs = [0u8; N];
    exchange(&mine, &mut theirs, step)?;
    Ok(theirs)
}

/// `exchange_versions`, `check_version_compatibility`, `check_sys_data`, `check_mtu`: the
/// same messages whatever carries them.
pub fn negotiate_over(
    exchange: &mut Exchange<'_>,
    local: &Negotiation,
) -> Result<Agreed, OobError> {
    let theirs: [u8; VERSION_LEN] = exchange_array(
        exchange,
        version_message(VERSION),
        "exchanging perftest versions",
    )?;
    let peer_version = parse_version(&theirs)?;
    let [cycle, line] = local.sys.to_messages();
    let cycle = exchange_array(exchange, cycle, "exchanging the cycle buffer size")?;
    let line = exchange_array(exchange, line, "exchanging the cache line size")?;
    let peer_sys = SysData::from_messages(cycle, line)?;
    let mtu = exchange_array(exchange, local.mtu.to_message(), "exchanging the MTU")?;
    let peer_mtu = IbMtu::parse(&mtu)?;
    Ok(Agreed {
        peer_version,
        sys: local.sys.max(peer_sys),
        mtu: local.mtu.min(peer_mtu),
    })
}

/// `xchg_bw_reports`: five 8-byte exchanges. Returns the peer's report.
pub fn exchange_reports_over(
    exchange: &mut Exchange<'_>,
    mine: &BwReport,
) -> Result<BwReport, OobError> {
    let mut theirs = [[0u8; 8]; 5];
    for (mine, theirs) in mine.to_messages().into_iter().zip(&mut theirs) {
        *theirs = exchange_array(exchange, mine, "exchanging test results")?;
    }
    Ok(BwReport::from_messages(theirs))
}
