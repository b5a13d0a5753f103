#include "kernels/cpu/tensor_types.h"

namespace sl::kernels {

TensorTypeInfo tensor_type_info(uint32_t type) {
    switch (static_cast<TensorType>(type)) {
        case TensorType::F32: return {"f32", 1, 4, true};
        case TensorType::F16: return {"f16", 1, 2, true};
        case TensorType::Q4_0: return {"q4_0", 32, 18, true};
        case TensorType::Q4_1: return {"q4_1", 32, 20, true};
        case TensorType::Q5_0: return {"q5_0", 32, 22, true};
        case TensorType::Q5_1: return {"q5_1", 32, 24, true};
        case TensorType::Q8_0: return {"q8_0", 32, 34, true};
        case TensorType::Q8_1: return {"q8_1", 32, 36, false};
        case TensorType::Q2_K: return {"q2_k", 256, 84, true};
        case TensorType::Q3_K: return {"q3_k", 256, 110, true};
        case TensorType::Q4_K: return {"q4_k", 256, 144, true};
        case TensorType::Q5_K: return {"q5_k", 256, 176, true};
        case TensorType::Q6_K: return {"q6_k", 256, 210, true};
        case TensorType::Q8_K: return {"q8_k", 256, 292, false};
        case TensorType::IQ2_XXS: return {"iq2_xxs", 256, 66, false};
        case TensorType::IQ2_XS: return {"iq2_xs", 256, 74, false};
        case TensorType::IQ3_XXS: return {"iq3_xxs", 256, 98, false};
        case TensorType::IQ1_S: return {"iq1_s", 256, 50, false};
        case TensorType::IQ4_NL: return {"iq4_nl", 32, 18, true};
        case TensorType::IQ3_S: return {"iq3_s", 256, 110, false};
        case TensorType::IQ2_S: return {"iq2_s", 256, 82, false};
        case TensorType::IQ4_XS: return {"iq4_xs", 256, 136, true};
        case TensorType::I8: return {"i8", 1, 1, false};
        case TensorType::I16: return {"i16", 1, 2, false};
        case TensorType::I32: return {"i32", 1, 4, false};
        case TensorType::I64: return {"i64", 1, 8, false};
        case TensorType::F64: return {"f64", 1, 8, false};
        case TensorType::IQ1_M: return {"iq1_m", 256, 56, false};
        case TensorType::BF16: return {"bf16", 1, 2, true};
        case TensorType::TQ1_0: return {"tq1_0", 256, 54, false};
        case TensorType::TQ2_0: return {"tq2_0", 256, 66, false};
        case TensorType::MXFP4: return {"mxfp4", 32, 17, false};
    }
    return {nullptr, 0, 0, false};
}

}  // namespace sl::kernels
