//! How the remote client finds its server's address, without a thread per request.
//!
//! ureq resolves the URL's host before every request, even one that reuses a pooled connection,
//! and its default resolver does it on a new thread whenever the request has a timeout (ours
//! always has: [`super::REQUEST_TIMEOUT`]), so that a slow DNS server cannot outlast the timeout.
//! Every inference of a remote client thus started and ended a thread (measured: 64 clients of
//! `easeml bench service` made ~7,000 threads a second, the kernel's `clone` and the unmapping of
//! their stacks interrupting the server's cores; `bench/results/service`, fix 12).
//!
//! [`QuickResolver`] answers an IP literal (`http://127.0.0.1:8080`, `http://[::1]:8080`) by
//! parsing it, and a name by ureq's resolver once per [`NAME_TTL`] (a server that moves is found
//! again within it; a connection already open stays where it is, as with any pool). A failed
//! lookup is not kept: the next request asks again.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// How long a name's addresses are used before they are looked up again.
pub(crate) const NAME_TTL: Duration = Duration::from_secs(30);

/// Names looked up at most once per [`NAME_TTL`]; IP literals never looked up.
#[derive(Debug, Default)]
pub(crate) struct QuickResolver {
    names: Mutex<HashMap<String, (Instant, ResolvedSocketAddrs)>>,
    lookup: DefaultResolver,
}

impl QuickResolver {
    fn names(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, ResolvedSocketAddrs)>> {
        self.names
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The URL's host (an IPv6 literal without its brackets) and port (the scheme's default when
    /// the URL names none); `None` for a URL without them, which ureq's resolver then refuses.
    fn host_and_port(uri: &Uri) -> Option<(&str, u16)> {
        let authority = uri.authority()?;
        let port = authority.port_u16().or_else(|| match uri.scheme_str()? {
            "https" => Some(443),
            "http" => Some(80),
            _ => None,
        })?;
        let host = authority.host();
        let host = host
            .strip_prefix('[')
            .and_then(|inner| inner.strip_suffix(']'))
            .unwrap_or(host);
        Some((host, port))
    }
}

impl Resolver for QuickResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let Some((host, port)) = Self::host_and_port(uri) else {
            return self.lookup.resolve(uri, config, timeout);
        };
        if let Ok(ip) = host.parse::<IpAddr>() {
            let mut addresses = self.empty();
            addresses.push(SocketAddr::new(ip, port));
            return Ok(addresses);
        }
        let key = format!("{host}:{port}");
        let now = Instant::now();
        if let Some((at, addresses)) = self.names().get(&key)
            && now.duration_since(*at) < NAME_TTL
        {
            return Ok(addresses.clone());
        }
        let addresses = self.lookup.resolve(uri, config, timeout)?;
        let mut cached = self.names();
        // Names of one server only: a client talks to one, so the map stays a few entries; an
        // expired entry is replaced here.
        cached.retain(|_, (at, _)| now.duration_since(*at) < NAME_TTL);
        cached.insert(key, (now, addresses.clone()));
        Ok(addresses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(resolver: &QuickResolver, url: &str) -> Result<Vec<SocketAddr>, ureq::Error> {
        let uri: Uri = url.parse().expect("a test URL");
        let config = Config::default();
        let timeout = NextTimeout {
            after: Duration::from_secs(5).into(),
            reason: ureq::Timeout::Resolve,
            per_read: None,
            per_write: None,
        };
        resolver
            .resolve(&uri, &config, timeout)
            .map(|addresses| addresses.iter().copied().collect())
    }

    #[test]
    fn an_ip_literal_is_its_own_address_and_a_name_is_looked_up_once() {
        let resolver = QuickResolver::default();
        let v4 = resolve(&resolver, "http://127.0.0.1:8080/api/v1/health").expect("resolves");
        assert_eq!(v4, vec!["127.0.0.1:8080".parse().expect("an address")]);
        let v6 = resolve(&resolver, "http://[::1]:9/api").expect("resolves");
        assert_eq!(v6, vec!["[::1]:9".parse().expect("an address")]);
        let default_port = resolve(&resolver, "https://10.1.2.3/").expect("resolves");
        assert_eq!(
            default_port,
            vec!["10.1.2.3:443".parse().expect("an address")]
        );
        assert!(resolver.names().is_empty());

        let named = resolve(&resolver, "http://localhost:8080/").expect("localhost resolves");
        assert!(
            named
                .iter()
                .all(|address| address.port() == 8080 && address.ip().is_loopback())
        );
        assert_eq!(resolver.names().len(), 1);
        let again = resolve(&resolver, "http://localhost:8080/other").expect("from the cache");
        assert_eq!(named, again);
    }

    #[test]
    fn a_url_without_a_host_is_refused_by_ureqs_resolver_and_nothing_is_kept() {
        let resolver = QuickResolver::default();
        assert!(resolve(&resolver, "/api/v1/health").is_err());
        assert!(resolver.names().is_empty());
    }
}
