use easeml_macros::easeml_schema;

#[easeml_schema]
mod app {
    pub struct Input {
        pub HeartRate: Tensor<3>,
    }
    pub struct Output(Tensor<2>);
}

fn main() {}
