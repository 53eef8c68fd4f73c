//! Stage: sandbox. A private directory and environment per scenario, and the search for
//! processes a scenario left behind.
