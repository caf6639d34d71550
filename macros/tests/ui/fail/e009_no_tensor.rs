use easeml_macros::easeml_schema;

#[easeml_schema]
mod app {
    pub struct Input {
        pub next: Option<Box<Input>>,
    }
    pub struct Output(Tensor<2>);
}

fn main() {}
