/* placeholder: being written */
typedef int trsim_placeholder_dtype;
