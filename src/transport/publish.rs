//! How unlock and release messages travel in a deployment: the pub/sub kinds that
//! scripts publish on and that waiters subscribe with, as one typed value. It is turned
//! into a script's publish argument only where the script is called
//! ([`Publish::command`]).

/// A set of pub/sub kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Kinds {
    /// Plain pub/sub: `PUBLISH`, heard by `SUBSCRIBE`.
    pub(crate) plain: bool,
    /// Sharded pub/sub (Redis 7 clusters): `SPUBLISH`, heard by `SSUBSCRIBE`.
    pub(crate) sharded: bool,
}

impl Kinds {
    /// Plain pub/sub only.
    pub(crate) const PLAIN: Self = Self {
        plain: true,
        sharded: false,
    };
    /// Sharded pub/sub only.
    pub(crate) const SHARDED: Self = Self {
        plain: false,
        sharded: true,
    };
    /// Both kinds.
    pub(crate) const BOTH: Self = Self {
        plain: true,
        sharded: true,
    };

    /// How many kinds the set holds.
    pub(crate) fn count(self) -> u32 {
        u32::from(self.plain) + u32::from(self.sharded)
    }
}

/// Where a deployment's unlock messages go and how its waiters hear them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Publish {
    /// The kinds scripts publish on: every Redisson peer of the deployment listens on
    /// one of them.
    on: Kinds,
    /// The subscriptions a waiter's channel needs so that every peer's unlock reaches it.
    heard: Kinds,
}

impl Publish {
    /// A single server's and a sentinel master's: plain pub/sub both ways.
    pub(crate) const PLAIN: Self = Self {
        on: Kinds::PLAIN,
        heard: Kinds::PLAIN,
    };

    /// Scripts publish on `on`; waiters subscribe with `heard`.
    pub(crate) fn new(on: Kinds, heard: Kinds) -> Self {
        Self { on, heard }
    }

    /// The subscriptions a waiter's channel needs.
    pub(crate) fn heard(self) -> Kinds {
        self.heard
    }

    /// The kinds scripts publish on.
    pub(crate) fn on(self) -> Kinds {
        self.on
    }

    /// The scripts' publish argument: they run each of its words as a command.
    pub(crate) fn command(self) -> &'static str {
        match (self.on.sharded, self.on.plain) {
            (true, true) => "SPUBLISH PUBLISH",
            (true, false) => "SPUBLISH",
            (false, _) => "PUBLISH",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_publish_argument_names_each_kind_published_on() {
        assert_eq!(Publish::PLAIN.command(), "PUBLISH");
        let sharded = Publish::new(Kinds::SHARDED, Kinds::BOTH);
        assert_eq!(sharded.command(), "SPUBLISH");
        assert_eq!(sharded.heard(), Kinds::BOTH);
        let both = Publish::new(Kinds::BOTH, Kinds::SHARDED);
        assert_eq!(both.command(), "SPUBLISH PUBLISH");
        assert_eq!(both.on().count(), 2);
    }
}
