fn main() {
    let _ = rocketmq::conf::ClientOption::default();
}
