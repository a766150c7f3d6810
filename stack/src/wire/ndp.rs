//! IPv6 neighbour discovery's solicitations and advertisements (RFC 4861 4.3, 4.4, 7.1):
//! the numbers, addresses and message bodies an endpoint needs to resolve IPv6 neighbours.
//! The endpoint's `resolve` wraps them in ICMPv6 and IPv6 (etherparse checks the checksums).

use std::net::Ipv6Addr;

/// RFC 4861 7.1: a node accepts NDP messages only with hop limit 255, which proves they
/// were not forwarded by a router.
pub const HOP_LIMIT: u8 = 255;
/// ICMPv6 type of a neighbour solicitation.
pub const NEIGHBOR_SOLICITATION: u8 = 135;
/// ICMPv6 type of a neighbour advertisement.
pub const NEIGHBOR_ADVERTISEMENT: u8 = 136;
/// Both messages' bodies open with the target address; options follow it.
pub const TARGET_LEN: usize = 16;

/// The link-layer address options (RFC 4861 4.6.1); options come in units of 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkLayerOption {
    /// The sender's address, in a solicitation.
    Source = 1,
    /// The target's address, in an advertisement.
    Target = 2,
}

impl LinkLayerOption {
    /// The option's type byte.
    pub const fn code(self) -> u8 {
        self as u8
    }
}

/// Options come in units of this many bytes; a link-layer address option on Ethernet is one.
pub const OPTION_UNIT: usize = 8;
/// A solicitation's or advertisement's body as an endpoint sends it: the target and one
/// link-layer address option.
pub const BODY_LEN: usize = TARGET_LEN + OPTION_UNIT;

/// The body of a solicitation or advertisement for `target` with the link-layer address
/// option `option` holding `mac` (length 1: its type, its length and the 6-byte address).
pub fn body(target: Ipv6Addr, option: LinkLayerOption, mac: [u8; 6]) -> [u8; BODY_LEN] {
    let mut body = [0; BODY_LEN];
    body[..TARGET_LEN].copy_from_slice(&target.octets());
    body[TARGET_LEN] = option.code();
    body[TARGET_LEN + 1] = 1;
    body[TARGET_LEN + 2..].copy_from_slice(&mac);
    body
}

/// Finds the link-layer address option `kind` among `options` (what follows the target);
/// an option of length zero or running past the end is an error.
pub fn find_link_layer_option(
    mut options: &[u8],
    kind: LinkLayerOption,
) -> Result<Option<[u8; 6]>, &'static str> {
    while options.len() >= 2 {
        let len = usize::from(options[1]) * OPTION_UNIT;
        if len == 0 || len > options.len() {
            return Err("NDP: option length 0 or beyond the message");
        }
        if options[0] == kind.code() {
            let mut mac = [0; 6];
            mac.copy_from_slice(&options[2..8]);
            return Ok(Some(mac));
        }
        options = &options[len..];
    }
    Ok(None)
}

/// The solicited-node multicast address of `addr`: `ff02::1:ff` and its low 24 bits
/// (RFC 4291 2.7.1).
pub fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// The Ethernet address of an IPv6 multicast group: `33:33` and its low 32 bits (RFC 2464 7).
pub fn multicast_mac(group: Ipv6Addr) -> [u8; 6] {
    let o = group.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];

    #[test]
    fn body_holds_target_then_one_option() {
        let target: Ipv6Addr = "fe80::1".parse().unwrap();
        let body = body(target, LinkLayerOption::Source, MAC);
        assert_eq!(body[..TARGET_LEN], target.octets());
        assert_eq!(body[TARGET_LEN..], [1, 1, 0x02, 0, 0, 0, 0, 0x0a]);
        let options = &body[TARGET_LEN..];
        assert_eq!(
            find_link_layer_option(options, LinkLayerOption::Source),
            Ok(Some(MAC))
        );
        assert_eq!(
            find_link_layer_option(options, LinkLayerOption::Target),
            Ok(None)
        );
    }

    #[test]
    fn options_are_walked_in_units_and_checked() {
        // A 16-byte option of another type, then the target link-layer address.
        let mut options = vec![5, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        options.extend_from_slice(&[2, 1, 0x02, 0, 0, 0, 0, 0x0a]);
        let found = find_link_layer_option(&options, LinkLayerOption::Target);
        assert_eq!(found, Ok(Some(MAC)));
        for bad in [&[1, 0, 0, 0, 0, 0, 0, 0][..], &[1, 2, 0, 0, 0, 0, 0, 0]] {
            assert!(find_link_layer_option(bad, LinkLayerOption::Source).is_err());
        }
        assert_eq!(
            find_link_layer_option(&[1], LinkLayerOption::Source),
            Ok(None)
        );
    }
}
