//! Redisson's wire protocol and nothing else: the key and channel names it derives from
//! a lock's name, the owner fields it writes into lock hashes, and the Lua scripts with
//! their typed calls and replies. Everything here is what a Redisson peer reads or
//! writes; nothing here knows about connections or threads.

pub(crate) mod hash;
pub(crate) mod names;
pub(crate) mod owner;
pub(crate) mod replies;
pub(crate) mod script;
