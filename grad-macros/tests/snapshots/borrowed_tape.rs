// grad!(&mut self.tape; tanh(self.x))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (&mut self.tape).as_tape();
        ::grad_runtime::g_tanh(__tape, self.x)
    }
}
