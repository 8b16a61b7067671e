//! The message of every kind of mistake, checked on tokens.

use super::errors;
