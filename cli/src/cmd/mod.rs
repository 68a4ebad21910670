//! One module per command.

pub mod advancedcronjob;
pub mod broadcastjob;
pub mod check;
pub mod complete;
pub mod completion;
pub mod crr;
pub mod describe;
pub mod dev;
pub mod distribution;
pub mod ephemeraljob;
pub mod exec;
pub mod history;
pub mod install;
pub mod migrate;
pub mod podprobemarker;
pub mod pull;
pub mod restart;
pub mod rollout;
pub mod scaledown;
pub mod set_image;
pub mod set_template;
pub mod status;
pub mod top;
