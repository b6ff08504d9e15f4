//! The verification harness proves itself: a short run is clean, and a seeded bug is
//! flagged. (Filled in below.)
