use easeml_macros::easeml_schema;

#[easeml_schema]
mod app {
    pub struct Input {
        pub image: Vec<f32>,
    }
    pub struct Output(Tensor<3>);
}

fn main() {}
