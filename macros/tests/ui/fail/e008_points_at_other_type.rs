use easeml_macros::easeml_schema;

#[easeml_schema]
mod app {
    pub struct Input {
        pub x: Tensor<3>,
        pub next: Option<Box<Output>>,
    }
    pub struct Output(Tensor<2>);
}

fn main() {}
